// Denoising a PNG through the open model (on its page, once completed): stride and pre-image method chosen,
// the image before and after enlarged by whole pixels, the service's side-by-side picture on request;
// every picture opens at full size on click.

import { call } from "./api.js";
import { $, fail, showBlob, showMessage } from "./ui.js";

// the pre-image methods of POST /v1/models/{name}/denoise-image (README: Denoising)
export const METHODS = ["auto", "fixed-point", "kwok-tsang", "gradient", "learned"];
const SHOWN_PX = 384; // small images are enlarged by whole pixels to about this width

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

async function denoise(event) {
  event.preventDefault();
  const form = event.target;
  const file = form.file.files[0];
  const name = model;
  if (!file || !name) {
    $("denoise-status").textContent = "choose a PNG";
    return;
  }
  const query = "?stride=" + encodeURIComponent(form.stride.value || "2") + "&method=" + encodeURIComponent(form.method.value);
  const url = "/v1/models/" + encodeURIComponent(name) + "/denoise-image" + query;
  const send = (extra) => call(url + extra, { method: "POST", headers: { "Content-Type": "image/png" }, body: file });
  showBlob("denoise-before", file);
  showBlob("denoise-after", null);
  showBlob("denoise-compare", null);
  $("denoise-compare-figure").hidden = true;
  $("denoise-status").textContent = "denoising through " + name + " (" + form.method.value + ")";
  const started = performance.now();
  try {
    const after = await (await send("")).blob();
    if (model !== name) return;
    showBlob("denoise-after", after);
    if (form.compare.checked) {
      showBlob("denoise-compare", await (await send("&compare=true")).blob());
      $("denoise-compare-figure").hidden = false;
    }
    $("denoise-status").textContent = "denoised in " + ((performance.now() - started) / 1000).toFixed(1) + " s with " +
      form.method.value + "; click a picture for its full size";
    showMessage("");
  } catch (error) {
    $("denoise-status").textContent = fail("denoise through " + name, error);
  }
}

export function installDenoise() {
  const select = $("denoise-form").method;
  select.replaceChildren(...METHODS.map((m) => Object.assign(document.createElement("option"), { value: m, textContent: m })));
  enlarge($("denoise-before"));
  enlarge($("denoise-after"));
  $("denoise-form").addEventListener("submit", denoise);
}
