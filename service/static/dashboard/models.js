// The models view: the list (open, export, delete) and the form that starts a fit; a model's own page is
// model-view.js. The solvers and kernels offered come from the service (/v1/solvers, /v1/kernels).

import { call, getJson, sendJson } from "./api.js";
import { onLists, refresh } from "./lists.js";
import { $, deleteButton, describe, download, el, emptyRow, fail, fillSelect, passesText, showMessage, statusBadge } from "./ui.js";

export let solvers = [];
let kernels = [];

const path = (name) => "/v1/models/" + encodeURIComponent(name);

export async function deleteModel(name) {
  try {
    await call(path(name), { method: "DELETE" });
    showMessage("deleted model " + name, "info");
    if (location.hash === "#/models/" + encodeURIComponent(name)) location.hash = "#/models";
  } catch (error) {
    fail("delete " + name, error);
  }
  await refresh();
}

export async function exportModel(name) {
  try {
    const bytes = await download(path(name) + "/export", name + ".kpca.tar");
    showMessage("exported " + name + ".kpca.tar (" + bytes + " bytes): kpca import loads it into any kpca-stream", "info");
  } catch (error) {
    fail("export " + name, error);
  }
}

function currentModel() {
  const found = /^#\/models\/(.+)$/.exec(location.hash);
  return found ? decodeURIComponent(found[1]) : null;
}

function render({ datasets, models }) {
  const open = currentModel();
  const rows = models.map((m) => {
    const progress = passesText(m);
    const row = el("tr", { className: "model-row clickable" + (m.name === open ? " selected" : ""), title: "open this model" },
      el("td", { textContent: m.name }), el("td", {}, statusBadge(m.status)), el("td", { textContent: m.dataset }),
      el("td", { textContent: m.solver }), el("td", { textContent: progress }),
      el("td", { className: "actions" },
        el("button", { type: "button", textContent: "export", className: "export-button", disabled: m.status !== "completed",
                       onclick: (e) => { e.stopPropagation(); exportModel(m.name); } }),
        deleteButton("delete", () => deleteModel(m.name), "model:" + m.name)));
    row.dataset.name = m.name;
    row.addEventListener("click", () => { location.hash = "#/models/" + encodeURIComponent(m.name); });
    return row;
  });
  $("models").tBodies[0].replaceChildren(...(rows.length ? rows : [emptyRow(6, "none yet: fit one with the form")]));
  const ready = datasets.filter((d) => d.status === "ready").map((d) => d.name);
  fillSelect($("fit-form").dataset, ready);
  $("fit-no-data").hidden = ready.length > 0;
}

// ---- the fit form ---------------------------------------------------------------------------------------

function solverChanged() {
  const form = $("fit-form");
  const solver = solvers.find((s) => s.name === form.solver.value);
  const passes = solver && solver.params.find((p) => p.name === "passes");
  form.passes.disabled = !passes;
  form.passes.placeholder = passes ? "default " + passes.schema.default : "not iterative";
  $("solver-summary").textContent = solver ? solver.summary : "";
}

function kernelChanged() {
  const form = $("fit-form");
  const kernel = kernels.find((k) => k.type === form.kernel.value);
  form.sigma.disabled = !(kernel && kernel.params.some((p) => p.name === "sigma"));
}

export async function loadCatalogue() {
  const form = $("fit-form");
  try {
    solvers = (await getJson("/v1/solvers")).solvers;
    fillSelect(form.solver, solvers.map((s) => s.name), form.solver.value || "ritz");
    solverChanged();
    kernels = (await getJson("/v1/kernels")).kernels;
    fillSelect(form.kernel, kernels.map((k) => k.type), form.kernel.value || "gaussian");
    kernelChanged();
    $("fit-status").textContent = "";
  } catch (error) {
    $("fit-status").textContent = describe(error);
  }
  return { solvers, kernels };
}

// The kernel and params of a form with fields kernel, sigma, passes and params (JSON); throws on bad JSON.
export function jobBody(form) {
  const kernel = { type: form.kernel.value || "gaussian" };
  if (form.sigma.value !== "" && !form.sigma.disabled) kernel.sigma = Number(form.sigma.value);
  let params;
  try {
    params = form.params.value.trim() ? JSON.parse(form.params.value) : {};
  } catch (error) {
    throw new Error("other parameters: not JSON (" + error.message + ")");
  }
  if (form.passes.value !== "" && !form.passes.disabled) params.passes = Number(form.passes.value);
  return { kernel, solver: form.solver.value || "ritz", params };
}

// Submit a job form (a fit, a clustering): POST /v1/{kind} with the form's name, data set, kernel, solver
// and parameters, and `extra(form)`'s fields; then open the job's page. The answer goes to <#statusId>.
export async function startJob(event, kind, extra, statusId) {
  event.preventDefault();
  const form = event.target;
  const name = form.elements["name"].value.trim();
  try {
    const body = { name, dataset: form.dataset.value, ...jobBody(form), ...extra(form) };
    const record = await sendJson("/v1/" + kind, body);
    $(statusId).textContent = "started " + name + " (" + record.solver + "): its page follows it";
    showMessage("");
    location.hash = "#/" + kind + "/" + encodeURIComponent(name);
    refresh();
  } catch (error) {
    $(statusId).textContent = fail("start " + name, error);
  }
}

export function installModels() {
  onLists(render);
  $("fit-form").solver.addEventListener("change", solverChanged);
  $("fit-form").kernel.addEventListener("change", kernelChanged);
  $("fit-form").addEventListener("submit", (event) =>
    startJob(event, "models", (form) => ({ n_components: Number(form.n_components.value) }), "fit-status"));
}

