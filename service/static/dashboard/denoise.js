// Denoising a PNG through the open model (on its page, once completed): stride and pre-image method chosen,
// one request per click, followed as an image job while it runs (its step, units done and seconds); the image
// before and after enlarged by whole pixels, side by side on request; every picture opens at full size on click.

import { call } from "./api.js";
import { $, fail, showBlob, showMessage } from "./ui.js";

// the pre-image methods of POST /v1/models/{name}/denoise-image (README: Denoising)
export const METHODS = ["auto", "fixed-point", "kwok-tsang", "gradient", "learned"];
const SHOWN_PX = 384; // small images are enlarged by whole pixels to about this width
const PROGRESS_MS = 1000; // how often a running request's progress is read
const COMPARE_PX = 480; // each image of the side-by-side picture is enlarged by whole pixels to about this width

let model = null;

// Enlarge a small image by a whole factor (pixelated) once it has loaded.
function enlarge(img) {
  img.onload = () => {
    const factor = Math.max(1, Math.floor(SHOWN_PX / Math.max(1, img.naturalWidth)));
    img.style.width = img.naturalWidth * factor + "px";
    img.title = img.naturalWidth + " x " + img.naturalHeight + " pixels, shown " + factor + "x; click for full size";
  };
}

export function resetDenoise(name) {
  model = name;
  ["denoise-before", "denoise-after", "denoise-compare"].forEach((id) => showBlob(id, null));
  $("denoise-compare-figure").hidden = true;
  $("denoise-status").textContent = "";
}

// The request's progress (GET /v1/image-jobs/{job}) in the status line until `done` resolves.
async function follow(job, name, method, done) {
  let ended = false;
  done.finally(() => { ended = true; });
  while (!ended) {
    await new Promise((resolve) => setTimeout(resolve, PROGRESS_MS));
    if (ended || model !== name) return;
    try {
      const state = await (await call("/v1/image-jobs/" + encodeURIComponent(job), { cache: "no-store" })).json();
      if (ended || model !== name) return;
      const units = state.total ? " " + state.done + "/" + state.total : "";
      $("denoise-status").textContent = "denoising through " + name + " (" + method + "): " + state.phase + units +
        ", " + state.elapsed_s.toFixed(1) + " s";
    } catch (_) {
      // not started yet, or already ended: the answer says how it went
    }
  }
}

// Before and after side by side, each enlarged by the same whole factor (pixelated), as a PNG blob.
async function sideBySide(before, after) {
  const [a, b] = await Promise.all([createImageBitmap(before), createImageBitmap(after)]);
  const factor = Math.max(1, Math.floor(COMPARE_PX / Math.max(1, a.width)));
  const gap = 8;
  const canvas = document.createElement("canvas");
  canvas.width = (a.width + b.width) * factor + gap;
  canvas.height = Math.max(a.height, b.height) * factor;
  const context = canvas.getContext("2d");
  context.imageSmoothingEnabled = false;
  context.fillStyle = "#fff";
  context.fillRect(0, 0, canvas.width, canvas.height);
  context.drawImage(a, 0, 0, a.width * factor, a.height * factor);
  context.drawImage(b, a.width * factor + gap, 0, b.width * factor, b.height * factor);
  return new Promise((resolve) => canvas.toBlob(resolve, "image/png"));
}

// One request per click, named as an image job so that its progress shows while it runs; the side-by-side
// picture is drawn here from the two images, not asked of the service a second time.
async function denoise(event) {
  event.preventDefault();
  const form = event.target;
  const file = form.file.files[0];
  const name = model;
  if (!file || !name) {
    $("denoise-status").textContent = "choose a PNG";
    return;
  }
  const job = "dashboard-" + Date.now().toString(36) + "-" + Math.floor(Math.random() * 1e6).toString(36);
  const query = "?stride=" + encodeURIComponent(form.stride.value || "2") + "&method=" + encodeURIComponent(form.method.value) +
    "&job=" + encodeURIComponent(job);
  const url = "/v1/models/" + encodeURIComponent(name) + "/denoise-image" + query;
  showBlob("denoise-before", file);
  showBlob("denoise-after", null);
  showBlob("denoise-compare", null);
  $("denoise-compare-figure").hidden = true;
  $("denoise-status").textContent = "denoising through " + name + " (" + form.method.value + ")";
  const started = performance.now();
  const answer = call(url, { method: "POST", headers: { "Content-Type": "image/png" }, body: file });
  follow(job, name, form.method.value, answer);
  try {
    const after = await (await answer).blob();
    if (model !== name) return;
    showBlob("denoise-after", after);
    if (form.compare.checked) {
      showBlob("denoise-compare", await sideBySide(file, after));
      $("denoise-compare-figure").hidden = false;
    }
    $("denoise-status").textContent = "denoised in " + ((performance.now() - started) / 1000).toFixed(1) + " s with " +
      form.method.value + "; click a picture for its full size";
    showMessage("");
  } catch (error) {
    $("denoise-status").textContent = fail("denoise through " + name, error);
  } finally {
    call("/v1/image-jobs/" + encodeURIComponent(job), { method: "DELETE" }).catch(() => {});  // its record, kept no longer
  }
}

export function installDenoise() {
  const select = $("denoise-form").method;
  select.replaceChildren(...METHODS.map((m) => Object.assign(document.createElement("option"), { value: m, textContent: m })));
  enlarge($("denoise-before"));
  enlarge($("denoise-after"));
  $("denoise-form").addEventListener("submit", denoise);
}
