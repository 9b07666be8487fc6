// The kpca-stream dashboard: lists, a live fit chart, cancel / resume, upload, fit and denoise forms.
// Every call goes through api.js (the key, the service's errors shown verbatim).

import { ApiError, apiKey, call, getJson, listAll, onKeyNeeded, sendJson, setApiKey, streamEvents } from "./api.js";
import { drawChart } from "./chart.js";
import { csvChunks, npyChunks } from "./upload.js";

const REFRESH_MS = 2000;
const ACTIVE = ["queued", "running"];
const $ = (id) => document.getElementById(id);

const watch = { name: null, status: null, points: [], passes: 0, stream: null };
let solvers = [];

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props || {});
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function describe(error) {
  return error instanceof ApiError ? error.describe() : String(error && error.message ? error.message : error);
}

function showMessage(text, kind) {
  const box = $("message");
  box.textContent = text;
  box.className = kind || "error";
  box.hidden = !text;
}

function fail(where, error) {
  showMessage(where + ": " + describe(error), "error");
  return describe(error);
}

function seconds(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "-";
  if (value < 60) return value.toFixed(1) + " s";
  return Math.floor(value / 60) + " min " + Math.round(value % 60) + " s";
}

function statusBadge(status) {
  return el("span", { className: "status " + status, textContent: status });
}

// ---- the API key --------------------------------------------------------------------------------

let askedForKey = false;

onKeyNeeded(() => {
  if (!askedForKey) $("api-key").focus(); // once per key: the periodic refresh must not steal focus
  askedForKey = true;
  $("key-status").textContent = apiKey() ? "this key was refused: enter another" : "this service needs an API key";
  $("key-status").className = "error";
});

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  setApiKey($("api-key").value.trim());
  askedForKey = false;
  $("key-status").textContent = apiKey() ? "key set for this tab" : "no key";
  $("key-status").className = "small";
  showMessage("");
  loadCatalogue();
  refresh();
  if (watch.name) startWatching(watch.name);
});

// ---- lists ----------------------------------------------------------------------------------------

function fillSelect(select, values, keep) {
  const previous = select.value;
  select.replaceChildren(...values.map((v) => el("option", { value: v, textContent: v })));
  if (values.includes(keep)) select.value = keep;
  else if (values.includes(previous)) select.value = previous;
}

function emptyRow(columns, text) {
  return el("tr", {}, el("td", { colSpan: columns, className: "small", textContent: text }));
}

function renderDatasets(datasets) {
  $("datasets").tBodies[0].replaceChildren(...(datasets.length ? [] : [emptyRow(5, "none yet: upload one below")]), ...datasets.map((d) => el("tr", { className: "dataset-row" },
    el("td", { textContent: d.name }), el("td", {}, statusBadge(d.status)), el("td", { textContent: d.n_rows }),
    el("td", { textContent: d.n_features }), el("td", { textContent: d.version }))));
  fillSelect(document.querySelector("#fit-form [name=dataset]"),
             datasets.filter((d) => d.status === "ready").map((d) => d.name));
}

function renderModels(models) {
  $("models").tBodies[0].replaceChildren(...(models.length ? [] : [emptyRow(6, "none yet: fit one below")]), ...models.map((m) => {
    const progress = m.progress ? m.progress.pass + "/" + m.progress.passes : "-";
    const row = el("tr", { className: "model-row" + (m.name === watch.name ? " selected" : ""), title: "watch this fit" },
      el("td", { textContent: m.name }), el("td", {}, statusBadge(m.status)), el("td", { textContent: m.dataset }),
      el("td", { textContent: m.solver }), el("td", { textContent: progress }),
      el("td", {}, el("button", { type: "button", textContent: "watch", className: "watch-button" })));
    row.dataset.name = m.name;
    row.addEventListener("click", () => startWatching(m.name));
    return row;
  }));
  fillSelect(document.querySelector("#denoise-form [name=model]"),
             models.filter((m) => m.status === "completed").map((m) => m.name));
  if (!watch.name) {
    const running = models.find((m) => ACTIVE.includes(m.status));
    if (running) startWatching(running.name);
  }
}

async function refresh() {
  const now = new Date().toLocaleTimeString();
  try {
    renderDatasets(await listAll("/v1/datasets", "datasets"));
    $("datasets-refreshed").textContent = "refreshed " + now;
  } catch (error) {
    $("datasets-refreshed").textContent = describe(error);
  }
  try {
    renderModels(await listAll("/v1/models", "models"));
    $("models-refreshed").textContent = "refreshed " + now;
  } catch (error) {
    $("models-refreshed").textContent = describe(error);
  }
}

// ---- the live fit -----------------------------------------------------------------------------------

function setWatchStatus(status, error) {
  watch.status = status;
  const badge = $("watch-status");
  badge.textContent = status || "";
  badge.className = "status " + (status || "");
  $("watch-error").textContent = error ? error.code + ": " + error.message : "";
  $("cancel-button").disabled = !ACTIVE.includes(status);
  $("resume-button").disabled = !status || ACTIVE.includes(status);
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

// ---- the watched model's pictures: fetched with the key, shown from object URLs ----------------------

const pictureUrls = {};

function showPicture(id, blob) {
  if (pictureUrls[id]) URL.revokeObjectURL(pictureUrls[id]);
  pictureUrls[id] = blob ? URL.createObjectURL(blob) : null;
  if (blob) $(id).src = pictureUrls[id];
  else $(id).removeAttribute("src");
}

function clearPictures() {
  showPicture("convergence-picture", null);
  showPicture("components-picture", null);
  $("components-note").textContent = "";
  $("pictures").hidden = true;
}

// once per watch when the fit has ended with at least one pass: convergence.png, and components.png when
// completed (a 422, rows that are not images or an autoencoder, is a muted note, not an error)
async function loadPictures(name, status) {
  const path = "/v1/models/" + encodeURIComponent(name);
  const current = () => watch.name === name;
  $("pictures").hidden = false;
  try {
    const blob = await (await call(path + "/convergence.png", { cache: "no-store" })).blob();
    if (current()) showPicture("convergence-picture", blob);
  } catch (error) {
    if (current()) $("components-note").textContent = "convergence picture: " + describe(error);
  }
  if (status !== "completed" || !current()) return;
  try {
    const blob = await (await call(path + "/components.png")).blob();
    if (current()) showPicture("components-picture", blob);
  } catch (error) {
    if (!current()) return;
    $("components-note").textContent = error instanceof ApiError && error.status === 422
      ? "no component images: " + error.message : "components picture: " + describe(error);
  }
}

function onEvent(message) {
  if (message.event === "progress") onProgress(message.data);
  else if (message.event === "status") setWatchStatus(message.data.status, message.data.error);
  else if (message.event === "end") {
    setWatchStatus(message.data.status, null);
    $("watch-remaining").textContent = message.data.status === "completed" ? "0 s" : "-";
    if (watch.points.length && ["completed", "failed", "cancelled"].includes(message.data.status)) loadPictures(watch.name, message.data.status);
    refresh();
  }
}

async function startWatching(name) {
  if (watch.stream) watch.stream.abort();
  const controller = new AbortController();
  Object.assign(watch, { name, points: [], passes: 0, stream: controller });
  $("watch-name").textContent = name;
  ["watch-pass", "watch-remaining", "watch-value"].forEach((id) => ($(id).textContent = "-"));
  $("watch-metric").textContent = $("watch-eigenvalues").textContent = "";
  setWatchStatus(null, null);
  clearPictures();
  document.querySelectorAll("#models tr.model-row").forEach((row) => row.classList.toggle("selected", row.dataset.name === name));
  drawChart($("chart"), [], 0);
  try {
    await streamEvents("/v1/models/" + encodeURIComponent(name) + "/events", onEvent, controller.signal);
  } catch (error) {
    if (watch.stream === controller) $("watch-error").textContent = fail("events of " + name, error);
  }
}

async function modelAction(action) {
  const name = watch.name;
  if (!name) return;
  try {
    const record = await sendJson("/v1/models/" + encodeURIComponent(name) + "/" + action, {});
    showMessage(action + " " + name + ": accepted (status now " + record.status + ")", "info");
    if (action === "resume") startWatching(name);
    refresh();
  } catch (error) {
    fail(action + " " + name, error);
  }
}

$("cancel-button").addEventListener("click", () => modelAction("cancel"));
$("resume-button").addEventListener("click", () => modelAction("resume"));

// ---- upload -----------------------------------------------------------------------------------------

$("upload-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const status = $("upload-status");
  const name = form.elements["name"].value.trim();
  const file = form.file.files[0];
  if (!file) return;
  try {
    status.textContent = "reading " + file.name;
    const plan = /\.npy$/i.test(file.name) ? npyChunks(new Uint8Array(await file.arrayBuffer()))
                                           : csvChunks(await file.text());
    status.textContent = "creating " + name;
    await sendJson("/v1/datasets", { name, n_features: plan.nFeatures, dtype: plan.dtype });
    const path = "/v1/datasets/" + encodeURIComponent(name);
    for (let i = 0; i < plan.chunks.length; i++) {
      status.textContent = "chunk " + (i + 1) + "/" + plan.chunks.length;
      await call(path + "/chunks/" + i, { method: "PUT", headers: { "Content-Type": plan.contentType }, body: plan.chunks[i] });
    }
    status.textContent = "committing";
    const record = await sendJson(path + "/commit", {});
    status.textContent = name + ": " + record.status + ", " + record.n_rows + " rows x " + record.n_features + " features";
    showMessage("");
    await refresh();
    document.querySelector("#fit-form [name=dataset]").value = name;
  } catch (error) {
    status.textContent = fail("upload " + name, error);
  }
});

// ---- fit --------------------------------------------------------------------------------------------

function solverChanged() {
  const form = $("fit-form");
  const solver = solvers.find((s) => s.name === form.solver.value);
  const passes = solver && solver.params.find((p) => p.name === "passes");
  form.passes.disabled = !passes;
  form.passes.placeholder = passes ? "default " + passes.schema.default : "not iterative";
  $("solver-summary").textContent = solver ? solver.summary : "";
}

async function loadCatalogue() {
  const form = $("fit-form");
  try {
    solvers = (await getJson("/v1/solvers")).solvers;
    fillSelect(form.solver, solvers.map((s) => s.name), form.solver.value || "kha-smd");
    solverChanged();
    const kernels = (await getJson("/v1/kernels")).kernels;
    fillSelect(form.kernel, kernels.map((k) => k.type), form.kernel.value || "gaussian");
    $("fit-status").textContent = "";
    form.kernel.onchange = () => {
      const kernel = kernels.find((k) => k.type === form.kernel.value);
      form.sigma.disabled = !(kernel && kernel.params.some((p) => p.name === "sigma"));
    };
  } catch (error) {
    $("fit-status").textContent = describe(error);
  }
}

$("fit-form").solver.addEventListener("change", solverChanged);

$("fit-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const name = form.elements["name"].value.trim();
  const kernel = { type: form.kernel.value || "gaussian" };
  if (form.sigma.value !== "" && !form.sigma.disabled) kernel.sigma = Number(form.sigma.value);
  let params;
  try {
    params = form.params.value.trim() ? JSON.parse(form.params.value) : {};
  } catch (error) {
    $("fit-status").textContent = fail("fit " + name, new Error("other parameters: not JSON (" + error.message + ")"));
    return;
  }
  if (form.passes.value !== "" && !form.passes.disabled) params.passes = Number(form.passes.value);
  const body = { name, dataset: form.dataset.value, kernel, n_components: Number(form.n_components.value),
                 solver: form.solver.value || "kha-smd", params };
  try {
    const record = await sendJson("/v1/models", body);
    $("fit-status").textContent = name + ": " + record.status;
    showMessage("");
    startWatching(name);
    refresh();
  } catch (error) {
    $("fit-status").textContent = fail("fit " + name, error);
  }
});

// ---- denoise ----------------------------------------------------------------------------------------

let objectUrls = [];

$("denoise-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const file = form.file.files[0];
  const model = form.model.value;
  if (!file || !model) {
    $("denoise-status").textContent = model ? "choose a PNG" : "no completed model to denoise with";
    return;
  }
  objectUrls.forEach((url) => URL.revokeObjectURL(url));
  objectUrls = [URL.createObjectURL(file)];
  $("denoise-before").src = objectUrls[0];
  $("denoise-after").removeAttribute("src");
  $("denoise-status").textContent = "denoising through " + model;
  const started = performance.now();
  try {
    const stride = form.stride.value || "2";
    const response = await call("/v1/models/" + encodeURIComponent(model) + "/denoise-image?stride=" + encodeURIComponent(stride),
                                { method: "POST", headers: { "Content-Type": "image/png" }, body: file });
    objectUrls.push(URL.createObjectURL(await response.blob()));
    $("denoise-after").src = objectUrls[1];
    $("denoise-status").textContent = "denoised in " + ((performance.now() - started) / 1000).toFixed(1) + " s";
    showMessage("");
  } catch (error) {
    $("denoise-status").textContent = fail("denoise through " + model, error);
  }
});

// ---- start ------------------------------------------------------------------------------------------

$("api-key").value = apiKey();
drawChart($("chart"), [], 0);
loadCatalogue();
refresh();
setInterval(refresh, REFRESH_MS);
