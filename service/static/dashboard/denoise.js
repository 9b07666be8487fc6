// Denoising a PNG through the open model (on its page, once completed), or hyper-resolving it 2-4 times
// (seed 002: the model's patches reconstruct the finer image): stride and pre-image method chosen,
// one background image job per click, its progress shown while it runs (its step, units done, seconds and the
// step's time left); the image before and after enlarged by whole pixels, side by side on request; every
// picture opens at full size on click.

import { jobName, progressText, runImageJob } from "./imagejob.js";
import { $, fail, showBlob, showMessage } from "./ui.js";

// the pre-image methods of POST /v1/models/{name}/denoise-image (README: Denoising)
export const METHODS = ["auto", "fixed-point", "kwok-tsang", "gradient", "learned"];
const SHOWN_PX = 384; // small images are enlarged by whole pixels to about this width
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

// One background image job per click (imagejob.js): its progress in the status line while it runs, then the
// answer; the side-by-side picture is drawn here from the two images, not asked of the service a second time.
async function denoise(event) {
  event.preventDefault();
  const form = event.target;
  const file = form.file.files[0];
  const name = model;
  if (!file || !name) {
    $("denoise-status").textContent = "choose a PNG";
    return;
  }
  const method = form.method.value;
  const upscale = Number(form.upscale.value || "1");
  const doing = upscale > 1 ? "hyper-resolving " + upscale + "x" : "denoising";
  const path = "/v1/models/" + encodeURIComponent(name) + "/denoise-image?stride=" +
    encodeURIComponent(form.stride.value || "2") + "&method=" + encodeURIComponent(method) +
    (upscale > 1 ? "&upscale=" + upscale : "");
  showBlob("denoise-before", file);
  showBlob("denoise-after", null);
  showBlob("denoise-compare", null);
  $("denoise-compare-figure").hidden = true;
  $("denoise-status").textContent = doing + " through " + name + " (" + method + ")";
  const started = performance.now();
  try {
    const { state, blob } = await runImageJob(path, file, jobName("dashboard"), (now) => {
      if (model === name) $("denoise-status").textContent = doing + " through " + name + " (" + method + "): " + progressText(now);
    });
    if (model !== name) return;
    if (!blob) {
      $("denoise-status").textContent = doing + " through " + name + " " + state.status + (state.error ? ": " + state.error : "");
      return;
    }
    showBlob("denoise-after", blob);
    if (form.compare.checked) {
      showBlob("denoise-compare", await sideBySide(file, blob));
      $("denoise-compare-figure").hidden = false;
    }
    $("denoise-status").textContent = (upscale > 1 ? "hyper-resolved " + upscale + "x" : "denoised") + " in " +
      ((performance.now() - started) / 1000).toFixed(1) + " s with " + method + "; click a picture for its full size";
    showMessage("");
  } catch (error) {
    $("denoise-status").textContent = fail((upscale > 1 ? "hyper-resolve" : "denoise") + " through " + name, error);
  }
}

export function installDenoise() {
  const select = $("denoise-form").method;
  select.replaceChildren(...METHODS.map((m) => Object.assign(document.createElement("option"), { value: m, textContent: m })));
  enlarge($("denoise-before"));
  enlarge($("denoise-after"));
  $("denoise-form").addEventListener("submit", denoise);
}
