// What every view of the dashboard shares: building elements, the message bar, status badges, tables,
// two-step delete buttons, pictures fetched with the key (shown from object URLs) and the full-size viewer.

import { ApiError, call } from "./api.js";

export const $ = (id) => document.getElementById(id);
export const ACTIVE = ["queued", "running"];
export const ENDED = ["completed", "failed", "cancelled"];

export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props || {});
  for (const child of children) if (child !== null && child !== undefined && child !== false) node.append(child);
  return node;
}

export function describe(error) {
  return error instanceof ApiError ? error.describe() : String(error && error.message ? error.message : error);
}

// The message bar under the header: an error (red) or a piece of news (green); "" hides it.
export function showMessage(text, kind) {
  const box = $("message");
  box.textContent = text;
  box.className = kind || "error";
  box.hidden = !text;
}

export function fail(where, error) {
  showMessage(where + ": " + describe(error), "error");
  return describe(error);
}

export function seconds(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "-";
  if (value < 60) return value.toFixed(1) + " s";
  return Math.floor(value / 60) + " min " + Math.round(value % 60) + " s";
}

export function number(value) {
  if (value === null || value === undefined) return "-";
  if (typeof value !== "number") return String(value);
  return Number.isInteger(value) ? String(value) : Number(value).toPrecision(4);
}

// A job's passes for a list: "3/20" while it runs; once completed, what it ran ("3, converged" where its tol
// stopped it before the passes asked for, "0, exact start" where its start was already the answer).
export function passesText(job) {
  const p = job.progress;
  if (!p) return "-";
  if (job.status !== "completed" || p.pass >= p.passes) return p.pass + "/" + p.passes;
  return p.pass === 0 ? "0, exact start" : p.pass + ", converged";
}

export function statusBadge(status) {
  return el("span", { className: "status " + status, textContent: status });
}

export function fillSelect(select, values, keep) {
  const previous = select.value;
  select.replaceChildren(...values.map((v) => el("option", { value: v, textContent: v })));
  if (values.includes(keep)) select.value = keep;
  else if (values.includes(previous)) select.value = previous;
}

export function emptyRow(columns, text) {
  return el("tr", {}, el("td", { colSpan: columns, className: "small", textContent: text }));
}

// A <table> of `rows` (arrays of cell values or nodes) under `header`.
export function table(header, rows, className) {
  const cell = (tag, value) => el(tag, {}, value instanceof Node ? value : number(value));
  return el("table", { className: className || "" },
    el("thead", {}, el("tr", {}, ...header.map((h) => el("th", { textContent: h })))),
    el("tbody", {}, ...rows.map((row) => el("tr", {}, ...row.map((v) => cell("td", v))))));
}

// A "delete" button that asks once more ("really delete?") before calling `action`. The lists are rebuilt
// on every refresh, so the question is kept by `key` (say "dataset:NAME"), not by the button: a refresh
// between the two clicks shows the new button asking too, and its click deletes.
const ASK_MS = 5000;
const askedUntil = new Map(); // key -> Date.now() at which the question lapses

export function deleteButton(label, action, key) {
  const button = el("button", { type: "button", className: "danger", textContent: label });
  const id = key || Symbol(label); // no key: the question belongs to this button alone
  let timer = null;
  const ask = (ms) => {
    button.textContent = "really " + label + "?";
    timer = setTimeout(() => { timer = null; button.textContent = label; }, ms);
  };
  const left = () => (askedUntil.get(id) || 0) - Date.now(); // > 0 while the question stands
  if (left() > 0) ask(left());
  button.addEventListener("click", async (event) => {
    event.stopPropagation();
    if (left() <= 0) {
      askedUntil.set(id, Date.now() + ASK_MS);
      ask(ASK_MS);
      return;
    }
    askedUntil.delete(id);
    clearTimeout(timer);
    button.disabled = true;
    try {
      await action();
    } finally {
      button.disabled = false;
      button.textContent = label;
    }
  });
  return button;
}

// ---- pictures: fetched with the key, shown from object URLs, full size on click ------------------------

const objectUrls = {};

// Show `blob` in <img id=id> (null: empty it); its object URL replaces the previous one.
export function showBlob(id, blob) {
  if (objectUrls[id]) URL.revokeObjectURL(objectUrls[id]);
  objectUrls[id] = blob ? URL.createObjectURL(blob) : null;
  if (blob) $(id).src = objectUrls[id];
  else $(id).removeAttribute("src");
}

// GET `path` (with the key) into <img id=id>; the error, if any, is returned (not thrown).
export async function loadPicture(id, path) {
  try {
    showBlob(id, await (await call(path, { cache: "no-store" })).blob());
    return null;
  } catch (error) {
    showBlob(id, null);
    return error;
  }
}

// Save a response body as a file named `filename` (a download the key could not make with a link).
export async function download(path, filename) {
  return save(await (await call(path)).blob(), filename);
}

// Offer `blob` as a file named `filename`; its size.
export function save(blob, filename) {
  const url = URL.createObjectURL(blob);
  const link = el("a", { href: url, download: filename });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  return blob.size;
}

const SMALL_SHOWN_PX = 640; // an image smaller than this is shown enlarged by whole pixels

// Every <img class="zoomable"> opens at its natural size in the viewer (a small one enlarged by whole
// pixels); a click or Escape closes it.
export function installViewer() {
  const viewer = $("viewer");
  const close = () => { viewer.hidden = true; $("viewer-image").removeAttribute("src"); };
  document.addEventListener("click", (event) => {
    const img = event.target;
    if (img instanceof HTMLImageElement && img.classList.contains("zoomable") && img.src) {
      const factor = Math.max(1, Math.floor(SMALL_SHOWN_PX / Math.max(1, img.naturalWidth, img.naturalHeight)));
      $("viewer-image").src = img.src;
      $("viewer-image").style.width = img.naturalWidth * factor + "px";
      $("viewer-caption").textContent = (img.alt || "") + " (" + img.naturalWidth + " x " + img.naturalHeight +
        " pixels" + (factor > 1 ? ", shown " + factor + " times" : "") + "; click or Escape to close)";
      viewer.hidden = false;
    } else if (!viewer.hidden && viewer.contains(img)) close();
  });
  document.addEventListener("keydown", (event) => { if (event.key === "Escape" && !viewer.hidden) close(); });
}
