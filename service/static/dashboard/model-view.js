// A model's page (#/models/NAME): its fit live (events stream, chart, pass and time left), cancel and resume
// with a passes box, a notice that always says what the model's state means and what can be done, the
// parameters it used, its warnings and history, its pictures (full size on click), export and delete.

import { getJson, sendJson, streamEvents } from "./api.js";
import { drawChart } from "./chart.js";
import { onLists, refresh } from "./lists.js";
import { deleteModel, exportModel, solvers } from "./models.js";
import { resetDenoise } from "./denoise.js";
import { $, ACTIVE, ENDED, deleteButton, describe, el, fail, loadPicture, number, seconds, showBlob, showMessage,
         table } from "./ui.js";

const watch = { name: null, record: null, points: [], passes: 0, stream: null, asked: null, pictures: false };

const path = (name) => "/v1/models/" + encodeURIComponent(name);
const iterative = (record) => { const s = solvers.find((x) => x.name === record.solver); return !s || s.iterative; };
const done = (record) => (record.progress ? record.progress.pass : record.history.length);
const planned = (record) => (record.progress ? record.progress.passes : (record.params_used || record.params).passes);

// What the model's state means and what can be done, from its record (and the action asked, while pending).
export function noticeFor(record, asked) {
  const k = done(record), n = planned(record);
  const of = n ? " of " + n : "";
  switch (record.status) {
    case "queued":
      return asked === "resume" ? "resumed from pass " + k + ": waiting for a worker" : "queued: waiting for a worker";
    case "running":
      return asked === "cancel" ? "cancel asked: the fit stops after its current block (pass " + k + of + " done)"
        : "running: pass " + k + of + " done" + (asked === "resume" ? " (resumed)" : "");
    case "completed":
      return "completed " + k + (k === 1 ? " pass" : " passes") + (record.stopped_early ? " (its tolerance was met early)" : "") +
        (iterative(record) ? "; to continue, resume with a larger total of passes" : "; fit in one go");
    case "cancelled":
      return "cancelled after pass " + k + of + ": Resume continues from its last checkpoint" +
        (k ? "" : " (no pass finished: it starts again)");
    case "failed":
      return "failed: " + (record.error ? record.error.code + ": " + record.error.message : "no reason given") +
        (iterative(record) ? ". Resume retries from the last checkpoint; or delete it." : ". Delete it and fit again.");
    default:
      return record.status;
  }
}

function setButtons(record) {
  const active = ACTIVE.includes(record.status);
  const canResume = !active && iterative(record);
  $("cancel-button").disabled = !active;
  const box = $("resume-passes");
  box.disabled = !canResume;
  box.min = String(done(record) + 1);
  box.placeholder = record.status === "completed" ? "more than " + done(record) : "as planned";
  box.title = "the new total number of passes (" + (planned(record) || "-") + " planned, " + done(record) + " done)";
  const wanted = box.value === "" ? null : Number(box.value);
  $("resume-button").disabled = !canResume || (record.status === "completed" && !(wanted > done(record)));
  $("export-model").disabled = record.status !== "completed";
  $("model-actions").title = iterative(record) ? "" : "a " + record.solver + " model is fit in one go: nothing to resume";
}

// The passes box when the status changes: ten more than done for a completed fit, empty (as planned) else.
function presetPasses(record, previous) {
  if (previous && previous.status === record.status) return;
  $("resume-passes").value = record.status === "completed" && iterative(record) ? String(done(record) + 10) : "";
}

function renderRecord(record) {
  presetPasses(record, watch.record);
  watch.record = record;
  if (ENDED.includes(record.status)) watch.asked = null; // what was asked has happened (or failed)
  const badge = $("watch-status");
  badge.textContent = record.status;
  badge.className = "status " + record.status;
  $("model-notice").textContent = noticeFor(record, watch.asked);
  $("model-notice").className = "notice " + record.status;
  $("watch-error").textContent = record.error ? record.error.code + ": " + record.error.message : "";
  setButtons(record);
  const used = record.params_used || {};
  const kernel = record.fit_kernel || record.kernel;
  $("model-summary").textContent = record.solver + ", " + record.n_components + " components of " + kernel.type +
    " kernel (" + Object.entries(kernel).filter(([k]) => k !== "type").map(([k, v]) => k + " " + number(v)).join(", ") +
    ") on " + record.dataset + " version " + (record.dataset_version || "-");
  $("model-params").replaceChildren(table(["parameter", "value used"],
    Object.entries(used).filter(([k]) => k !== "kernel").map(([k, v]) => [k, typeof v === "object" ? JSON.stringify(v) : v]), "compact"));
  $("model-warnings").replaceChildren(...(record.warnings || []).map((w) => el("li", { textContent: w })));
  $("model-warnings-box").hidden = !(record.warnings || []).length;
  const history = record.history || [];
  $("history-count").textContent = history.length + (history.length === 1 ? " pass" : " passes");
  $("model-history").replaceChildren(table(["pass", "elapsed", (history[0] || { convergence: {} }).convergence.metric || "convergence",
                                            "iterate", "eigenvalue 1", "workers"],
    history.map((h) => [h.pass, seconds(h.elapsed_s), h.convergence.value, h.convergence.iterate, h.eigenvalues[0], h.workers || 1]), "compact"));
  $("denoise-form").hidden = record.status !== "completed";
  if (ENDED.includes(record.status) && !watch.pictures) {
    if (history.length) loadPictures(record);
    else { // nothing to draw: say so rather than show empty frames
      $("pictures").hidden = false;
      $("components-note").textContent = "no pass finished before the fit " + (record.status === "failed" ? "failed" : "stopped") +
        ": there is nothing to draw" + (iterative(record) && record.status !== "completed" ? "; resume it to fit" : "");
    }
  }
}

function onProgress(data) {
  watch.points = watch.points.filter((p) => p.pass < data.pass); // a resume may restart from an earlier pass
  const value = data.convergence ? data.convergence.value : null;
  watch.points.push({ pass: data.pass, value });
  watch.passes = data.passes;
  $("watch-pass").textContent = data.pass + "/" + data.passes;
  $("watch-remaining").textContent = seconds(data.remaining_s);
  $("watch-value").textContent = value === null || value === undefined ? "-" : Number(value).toPrecision(4);
  $("watch-metric").textContent = data.convergence ? "(" + data.convergence.metric + ")" : "";
  const eigenvalues = data.eigenvalues || [];
  $("watch-eigenvalues").textContent = eigenvalues.length
    ? "eigenvalues: " + eigenvalues.map((v) => Number(v).toPrecision(4)).join(", ") : "";
  $("chart").dataset.points = String(watch.points.length);
  drawChart($("chart"), watch.points, watch.passes);
}

// convergence.png once the fit has ended with a pass; components.png for a completed model only (a 422,
// rows that are not images or an autoencoder, is a muted note), else a note that says why there is none.
async function loadPictures(record) {
  const name = record.name;
  watch.pictures = true;
  $("pictures").hidden = false;
  const note = [];
  const failed = await loadPicture("convergence-picture", path(name) + "/convergence.png");
  if (failed && watch.name === name) note.push("convergence picture: " + describe(failed));
  if (record.status === "completed") {
    const error = await loadPicture("components-picture", path(name) + "/components.png");
    if (error && watch.name === name) note.push(error.status === 422 ? "no component images: " + error.message : "components picture: " + describe(error));
  } else {
    note.push("component images are drawn for a completed model; this one is " + record.status +
              " after pass " + done(record) + (iterative(record) ? ": resume it to complete it" : ""));
  }
  if (watch.name === name) $("components-note").textContent = note.join("; ");
}

// The pictures of an earlier state are gone: drawn again when the fit ends.
function clearPictures() {
  watch.pictures = false;
  $("components-note").textContent = "";
  showBlob("convergence-picture", null);
  showBlob("components-picture", null);
  $("pictures").hidden = true;
}

async function reload(name) {
  try {
    const record = await getJson(path(name));
    if (watch.name === name) renderRecord(record);
    return record;
  } catch (error) {
    if (watch.name === name) $("model-notice").textContent = describe(error);
    return null;
  }
}

function onEvent(name, message) {
  if (watch.name !== name) return;
  if (message.event === "progress") onProgress(message.data);
  else if (message.event === "status" || message.event === "end") {
    if (message.event === "end") $("watch-remaining").textContent = message.data.status === "completed" ? "0 s" : "-";
    if (message.data.status === "deleted") { $("model-notice").textContent = "deleted"; return; }
    reload(name).then(() => { if (message.event === "end") refresh(); });
  }
}

async function follow(name) {
  if (watch.stream) watch.stream.abort();
  const controller = new AbortController();
  watch.stream = controller;
  watch.points = [];
  try {
    await streamEvents(path(name) + "/events", (m) => onEvent(name, m), controller.signal);
  } catch (error) {
    if (watch.stream === controller) $("watch-error").textContent = fail("events of " + name, error);
  }
}

// Open model `name`'s page (again with `force`, say after a new API key).
export async function openModel(name, force) {
  if (!force && watch.name === name && watch.stream && !watch.stream.signal.aborted) return;
  Object.assign(watch, { name, record: null, points: [], passes: 0, asked: null, pictures: false });
  $("model-details").hidden = false;
  $("watch-name").textContent = name;
  ["watch-pass", "watch-remaining", "watch-value"].forEach((id) => ($(id).textContent = "-"));
  $("watch-metric").textContent = $("watch-eigenvalues").textContent = $("watch-error").textContent = "";
  clearPictures();
  resetDenoise(name);
  $("delete-model-slot").replaceChildren(deleteButton("delete model", () => deleteModel(name)));
  document.querySelectorAll("#models tr.model-row").forEach((row) => row.classList.toggle("selected", row.dataset.name === name));
  drawChart($("chart"), [], 0);
  await reload(name);
  follow(name);
}

export function closeModel() {
  if (watch.stream) watch.stream.abort();
  Object.assign(watch, { name: null, record: null, stream: null });
  $("model-details").hidden = true;
}

async function act(action) {
  const name = watch.name;
  if (!name) return;
  const body = {};
  if (action === "resume" && $("resume-passes").value !== "") body.passes = Number($("resume-passes").value);
  try {
    const record = await sendJson(path(name) + "/" + action, body);
    watch.asked = action;
    showMessage("");
    if (action === "resume") {
      clearPictures();
      renderRecord(record);
      follow(name);
    } else {
      renderRecord(record);
    }
    refresh();
  } catch (error) {
    fail(action + " " + name, error);
    reload(name);
  }
}

// A status the lists show that the page does not (a resume or delete elsewhere): read the record again,
// and follow the events again if the fit runs once more.
function onListsChanged({ models }) {
  if (!watch.name || !watch.record) return;
  const summary = models.find((m) => m.name === watch.name);
  if (!summary) { $("model-notice").textContent = "model " + watch.name + " no longer exists"; return; }
  if (summary.status !== watch.record.status) {
    const wasEnded = ENDED.includes(watch.record.status);
    reload(watch.name).then((record) => {
      if (record && wasEnded && ACTIVE.includes(record.status)) { clearPictures(); follow(watch.name); }
    });
  }
}

export function installModelView() {
  $("cancel-button").addEventListener("click", () => act("cancel"));
  $("resume-button").addEventListener("click", () => act("resume"));
  $("resume-passes").addEventListener("input", () => watch.record && setButtons(watch.record));
  $("export-model").addEventListener("click", () => watch.name && exportModel(watch.name));
  $("model-close").addEventListener("click", () => { location.hash = "#/models"; });
  onLists(onListsChanged);
}
