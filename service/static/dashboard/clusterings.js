// The clusterings view: the list (open, delete), the form that starts a spectral clustering, and a
// clustering's page (#/clusterings/NAME): its state in words, cancel and resume, its history per pass
// (labels change, variation of information against reference labels) and the sizes of its clusters.

import { call, getJson, sendJson } from "./api.js";
import { onLists, refresh } from "./lists.js";
import { solvers, startJob } from "./models.js";
import { $, ACTIVE, deleteButton, describe, el, emptyRow, fail, fillSelect, loadPicture, number, save, seconds,
         showMessage, passesText, statusBadge, table } from "./ui.js";

const path = (name) => "/v1/clusterings/" + encodeURIComponent(name);
const AFFINITIES = ["gaussian", "laplacian"];
let shown = null;
let record = null;
let asked = null;

async function remove(name) {
  try {
    await call(path(name), { method: "DELETE" });
    showMessage("deleted clustering " + name, "info");
    if (shown === name) location.hash = "#/clusterings";
  } catch (error) {
    fail("delete " + name, error);
  }
  await refresh();
}

// A completed clustering's labels, every page followed, as a CSV of one label a line (row order).
async function exportLabels(name) {
  try {
    const labels = [];
    let next = path(name) + "?labels_limit=100000";
    while (next) {
      const page = await getJson(next);
      labels.push(...page.labels);
      next = page.next;
    }
    const bytes = save(new Blob(["label\n" + labels.join("\n") + "\n"], { type: "text/csv" }), name + "-labels.csv");
    showMessage("saved " + name + "-labels.csv: " + labels.length + " labels (" + bytes + " bytes), one a line in row order", "info");
  } catch (error) {
    fail("labels of " + name, error);
  }
}

function render({ datasets, clusterings }) {
  const rows = clusterings.map((c) => {
    const progress = passesText(c);
    const row = el("tr", { className: "clustering-row clickable" + (c.name === shown ? " selected" : "") },
      el("td", { textContent: c.name }), el("td", {}, statusBadge(c.status)), el("td", { textContent: c.dataset }),
      el("td", { textContent: c.n_clusters }), el("td", { textContent: c.solver }), el("td", { textContent: progress }),
      el("td", { className: "actions" },
        el("button", { type: "button", textContent: "labels", className: "labels-button", disabled: c.status !== "completed",
                       title: "save the labels as CSV", onclick: (e) => { e.stopPropagation(); exportLabels(c.name); } }),
        deleteButton("delete", () => remove(c.name), "clustering:" + c.name)));
    row.dataset.name = c.name;
    row.addEventListener("click", () => { location.hash = "#/clusterings/" + encodeURIComponent(c.name); });
    return row;
  });
  $("clusterings").tBodies[0].replaceChildren(...(rows.length ? rows : [emptyRow(7, "none yet: start one with the form")]));
  const ready = datasets.filter((d) => d.status === "ready");
  const form = $("cluster-form");
  fillSelect(form.dataset, ready.map((d) => d.name));
  fillSelect(form.labels_dataset, ["", ...ready.filter((d) => d.n_features === 1).map((d) => d.name)]);
  const summary = clusterings.find((c) => c.name === shown);
  if (shown && record && summary && summary.status !== record.status) openClustering(shown, true);
}

function notice(r) {
  const k = r.progress ? r.progress.pass : r.history.length;
  if (r.status === "queued") return asked === "resume" ? "resumed: waiting for a worker" : "queued: waiting for a worker";
  if (r.status === "running") return asked === "cancel" ? "cancel asked: it stops after its current block" : "running: pass " + k + " done";
  if (r.status === "completed") return "completed: " + (r.labels_total || r.n_rows) + " labels in " + r.n_clusters + " clusters" +
    (r.variation_of_information !== null && r.variation_of_information !== undefined
      ? ", variation of information " + number(r.variation_of_information) + " against " + r.labels_dataset : "");
  if (r.status === "cancelled") return "cancelled after pass " + k + ": Resume continues from its last checkpoint";
  return "failed: " + (r.error ? r.error.code + ": " + r.error.message : "no reason given");
}

// The kernel in words ("gaussian, sigma 3.065"), not its JSON.
export function kernelWords(kernel) {
  if (!kernel) return "-";
  const params = Object.entries(kernel).filter(([key]) => key !== "type")
    .map(([key, value]) => key + " " + (typeof value === "number" ? Number(value.toPrecision(4)) : value));
  return [kernel.type, ...params].join(", ");
}

// A figure at rounding level (an exact fit's excess error, -8.9e-16) is 0, said so, not a negative error.
const roundingWords = (value) => (value !== null && value !== undefined && Math.abs(value) < 1e-12 ? "0 (rounding)" : value);

// How many passes ran of how many asked, and why it stopped there: a fit that met its tol early is done.
function passesWords(r) {
  const p = r.progress;
  if (!p || r.status !== "completed") return "";
  if (p.pass < p.passes) return "; converged at pass " + p.pass + " (of at most " + p.passes + ": its tol met)";
  return "; " + p.pass + " passes";
}

// Resume: a completed fit continues only to more passes than it ran, so the button waits for that number.
let resumable = false;
function updateResume() {
  const button = $("clustering-resume"), box = $("clustering-passes");
  const done = record && record.progress ? record.progress.pass : 0;
  box.placeholder = record && record.status === "completed" ? "more than " + done : "";
  const wanted = box.value === "" ? null : Number(box.value);
  button.disabled = !resumable || (record.status === "completed" && !(wanted > done));
  button.title = button.disabled && resumable ? "give a new total of passes above " + done : "";
}

function sizes(labels) {
  const counts = new Map();
  for (const label of labels) counts.set(label, (counts.get(label) || 0) + 1);
  return [...counts.entries()].sort((a, b) => a[0] - b[0]);
}

export async function openClustering(name, quiet) {
  shown = name;
  if (!quiet) asked = null;
  $("clustering-details").hidden = false;
  $("clustering-title").textContent = name;
  document.querySelectorAll("#clusterings tr.clustering-row").forEach((r) => r.classList.toggle("selected", r.dataset.name === name));
  try {
    const r = await getJson(path(name) + "?labels_limit=100000");
    if (shown !== name) return;
    record = r;
    if (!ACTIVE.includes(r.status)) asked = null;
    const badge = $("clustering-status");
    badge.textContent = r.status;
    badge.className = "status " + r.status;
    $("clustering-notice").textContent = notice(r);
    $("clustering-notice").className = "notice " + r.status;
    $("clustering-cancel").disabled = !ACTIVE.includes(r.status);
    const solver = solvers.find((x) => x.name === r.solver);
    resumable = !ACTIVE.includes(r.status) && !(solver && !solver.iterative);
    updateResume();
    const history = r.history || [];
    const metric = history.length ? history[0].convergence.metric.replace(/_/g, " ") : "convergence";
    $("clustering-body").replaceChildren(...[
      el("p", { className: "small", textContent: r.solver + ", " + r.n_clusters + " clusters of " + r.dataset + " version " +
        r.dataset_version + ", kernel " + kernelWords(r.fit_kernel || r.kernel) + passesWords(r) }),
      history.length ? table(["pass", "elapsed", metric, "top eigenvalue", "labels change", "VI"], history.map((h) =>
        [h.pass, seconds(h.elapsed_s), roundingWords(h.convergence.value), h.eigenvalues && h.eigenvalues.length ? h.eigenvalues[0] : null,
          h.labels_change, h.variation_of_information]), "compact")
        : el("p", { className: "small", textContent: "no pass yet" }),
      r.labels ? el("p", { className: "small", textContent: "cluster sizes: " +
        sizes(r.labels).map(([label, count]) => label + ": " + count).join(", ") +
        (r.next ? " (of the first " + r.labels.length + " labels)" : "") }) : null,
      r.pictures && r.pictures.clusters ? el("img", { id: "clustering-picture", className: "zoomable",
        alt: "the rows at their spectral coordinates, coloured by cluster" + (r.labels_dataset ? " and by the reference labels" : "") })
        : null,
    ].filter(Boolean));
    if (r.pictures && r.pictures.clusters) loadPicture("clustering-picture", r.pictures.clusters); // with the key, if any
  } catch (error) {
    $("clustering-notice").textContent = describe(error);
  }
}

async function act(action) {
  if (!shown) return;
  const body = {};
  if (action === "resume" && $("clustering-passes").value !== "") body.passes = Number($("clustering-passes").value);
  try {
    await sendJson(path(shown) + "/" + action, body);
    asked = action;
    showMessage("");
    await refresh();
    openClustering(shown, true);
  } catch (error) {
    fail(action + " " + shown, error);
  }
}

export function closeClustering() {
  shown = null;
  record = null;
  $("clustering-details").hidden = true;
}

// The solvers spectral clustering may use, once the catalogue has loaded.
export function clusteringCatalogue() {
  const form = $("cluster-form");
  fillSelect(form.solver, solvers.filter((s) => s.clusterable).map((s) => s.name), "ritz");
  fillSelect(form.kernel, AFFINITIES, "gaussian");
}

export function installClusterings() {
  onLists(render);
  $("cluster-form").addEventListener("submit", (event) => startJob(event, "clusterings", (form) => ({
    n_clusters: Number(form.n_clusters.value), ...(form.labels_dataset.value ? { labels_dataset: form.labels_dataset.value } : {}),
  }), "cluster-status"));
  $("clustering-cancel").addEventListener("click", () => act("cancel"));
  $("clustering-resume").addEventListener("click", () => act("resume"));
  $("clustering-passes").addEventListener("input", updateResume);
  $("clustering-close").addEventListener("click", () => { location.hash = "#/clusterings"; });
  // a running clustering's page follows its passes
  setInterval(() => { if (shown && record && ACTIVE.includes(record.status)) openClustering(shown, true); }, 1000);
}
