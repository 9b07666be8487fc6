// The data sets view: the list (details, download, delete), a data set's details (versions, checksum, who
// uses it), the upload of a CSV or .npy file, and a PNG made into the data set of its patches.

import { call, getJson, sendJson } from "./api.js";
import { lists, onLists, refresh, usersOf } from "./lists.js";
import { csvChunks, npyChunks } from "./upload.js";
import { $, deleteButton, describe, download, el, emptyRow, fail, showMessage, statusBadge, table } from "./ui.js";

let shown = null; // the data set whose details are open

const path = (name) => "/v1/datasets/" + encodeURIComponent(name);

async function remove(name, cascade) {
  try {
    await call(path(name) + (cascade ? "?cascade=true" : ""), { method: "DELETE" });
    showMessage("deleted data set " + name + (cascade ? " and the models and clusterings fit on it" : ""), "info");
    if (shown === name) closeDetails();
  } catch (error) {
    if (error.status !== 409) fail("delete " + name, error);
    else {
      // the service's words end with its query's syntax (?cascade=true): here the button does it
      showMessage("delete " + name + ": " + describe(error).replace(/,? or delete with \?cascade=true to delete them too/, ""), "error");
      offerCascade(name);
    }
  }
  await refresh();
}

// After a 409 (models or clusterings use it): a second button that deletes them too.
function offerCascade(name) {
  $("message").append(" ", deleteButton("delete " + name + " with them", () => remove(name, true)));
}

async function save(name) {
  try {
    const bytes = await download(path(name) + "/data.npy", name + ".npy");
    showMessage("downloaded " + name + ".npy (" + bytes + " bytes)", "info");
  } catch (error) {
    fail("download " + name, error);
  }
}

function render({ datasets }) {
  const rows = datasets.map((d) => {
    const row = el("tr", { className: "dataset-row clickable" + (d.name === shown ? " selected" : "") },
      el("td", { textContent: d.name }), el("td", {}, statusBadge(d.status)), el("td", { textContent: d.n_rows }),
      el("td", { textContent: d.n_features }), el("td", { textContent: d.version }),
      el("td", { className: "actions" },
        el("button", { type: "button", textContent: "download", className: "download-button",
                       disabled: d.status !== "ready", onclick: (e) => { e.stopPropagation(); save(d.name); } }),
        deleteButton("delete", () => remove(d.name, false), "dataset:" + d.name)));
    row.dataset.name = d.name;
    row.addEventListener("click", () => { location.hash = "#/datasets/" + encodeURIComponent(d.name); });
    return row;
  });
  $("datasets").tBodies[0].replaceChildren(...(rows.length ? rows : [emptyRow(6, "none yet: upload one below")]));
  if (shown && !datasets.some((d) => d.name === shown)) closeDetails();
}

function closeDetails() {
  shown = null;
  $("dataset-details").hidden = true;
}

export async function openDataset(name) {
  shown = name;
  document.querySelectorAll("#datasets tr.dataset-row").forEach((r) => r.classList.toggle("selected", r.dataset.name === name));
  const box = $("dataset-details");
  box.hidden = false;
  $("dataset-title").textContent = name;
  const body = $("dataset-body");
  try {
    const d = await getJson(path(name));
    if (shown !== name) return;
    const users = usersOf(name);
    body.replaceChildren(...[
      el("p", {}, statusBadge(d.status), " " + d.n_rows + " rows x " + d.n_features + " features (" + d.dtype + "), version " + d.version),
      el("p", { className: "small", textContent: "checksum " + (d.checksum || "-") }),
      d.versions.length ? table(["version", "rows", "chunks", "committed"],
                                d.versions.map((v) => [v.version, v.n_rows, v.n_chunks, v.committed_at || "-"]), "compact") : null,
      d.staged.length ? el("p", { className: "small", textContent: "staged, not committed: chunks " + d.staged.join(", ") }) : null,
      el("p", { className: "small", textContent: users.length ? "used by " + users.join(", ") : "no model or clustering uses it" }),
    ].filter(Boolean));
  } catch (error) {
    body.replaceChildren(el("p", { className: "error", textContent: describe(error) }));
  }
}

// ---- upload a CSV or .npy file --------------------------------------------------------------------------

// What a submitted form of this view holds: the form, its status line, the name and the file chosen.
function submitted(event, statusId) {
  event.preventDefault();
  const form = event.target;
  return { form, status: $(statusId), name: form.elements["name"].value.trim(), file: form.file.files[0] };
}

async function upload(event) {
  const { status, name, file } = submitted(event, "upload-status");
  if (!file) return;
  try {
    status.textContent = "reading " + file.name;
    const plan = /\.npy$/i.test(file.name) ? npyChunks(new Uint8Array(await file.arrayBuffer()))
                                           : csvChunks(await file.text());
    status.textContent = "creating " + name;
    await sendJson("/v1/datasets", { name, n_features: plan.nFeatures, dtype: plan.dtype });
    for (let i = 0; i < plan.chunks.length; i++) {
      status.textContent = "chunk " + (i + 1) + "/" + plan.chunks.length;
      await call(path(name) + "/chunks/" + i, { method: "PUT", headers: { "Content-Type": plan.contentType }, body: plan.chunks[i] });
    }
    status.textContent = "committing";
    const record = await sendJson(path(name) + "/commit", {});
    status.textContent = name + ": " + record.status + ", " + record.n_rows + " rows x " + record.n_features + " features";
    showMessage("");
    await refresh();
  } catch (error) {
    status.textContent = fail("upload " + name, error);
  }
}

// ---- a PNG's patches ----------------------------------------------------------------------------------

async function fromImage(event) {
  const { form, status, name, file } = submitted(event, "image-status");
  if (!file) return;
  const query = "?patch=" + encodeURIComponent(form.patch.value) + "&stride=" + encodeURIComponent(form.stride.value);
  try {
    status.textContent = "cutting " + file.name + " into patches";
    const response = await call(path(name) + "/from-image" + query, { method: "POST", headers: { "Content-Type": "image/png" }, body: file });
    const record = await response.json();
    status.textContent = name + ": " + record.status + ", " + record.n_rows + " patches of " + form.patch.value + "x" +
      form.patch.value + " (" + record.n_features + " values each): fit a model on it in Models";
    showMessage("");
    await refresh();
  } catch (error) {
    status.textContent = fail("image " + name, error);
  }
}

export function installDatasets() {
  onLists(render);
  $("upload-form").addEventListener("submit", upload);
  $("image-form").addEventListener("submit", fromImage);
  $("dataset-close").addEventListener("click", () => { location.hash = "#/datasets"; });
}

