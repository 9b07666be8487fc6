// Denoising a photograph with nothing but the photograph (POST /v1/denoise-image): one background image job
// per click (imagejob.js), its progress (step, units done, seconds, the step's time left) shown while it runs,
// then the image before and after; a cancel button while it runs.

import { cancelImageJob, jobName, progressText, runImageJob } from "./imagejob.js";
import { $, fail, showBlob, showMessage } from "./ui.js";

let running = null; // the job now running, if any

function sizeOf(file) {
  return new Promise((resolve) => {
    const img = new Image();
    const url = URL.createObjectURL(file);
    img.onload = () => { URL.revokeObjectURL(url); resolve(img.naturalWidth + " x " + img.naturalHeight); };
    img.onerror = () => { URL.revokeObjectURL(url); resolve(file.name); };
    img.src = url;
  });
}

async function denoise(event) {
  event.preventDefault();
  const form = event.target;
  const file = form.file.files[0];
  if (!file || running) return;
  const job = jobName("dashboard-photo");
  const status = $("photo-status");
  const bar = $("photo-progress");
  const size = await sizeOf(file);
  running = job;
  form.querySelector("button[type=submit]").disabled = true;
  $("photo-cancel").disabled = false;
  showBlob("photo-before", file);
  showBlob("photo-after", null);
  bar.hidden = false;
  bar.value = 0;
  status.textContent = "sending " + size;
  try {
    const { state, blob, chosen } = await runImageJob("/v1/denoise-image", file, job, (now) => {
      bar.value = now.total ? now.done / now.total : 0;
      status.textContent = "denoising " + size + ": " + progressText(now);
    });
    if (!blob) {
      status.textContent = "denoising " + size + " " + state.status + (state.error ? ": " + state.error : "");
      return;
    }
    showBlob("photo-after", blob);
    bar.value = 1;
    status.textContent = "denoised " + size + " in " + state.elapsed_s.toFixed(1) + " s: " + (state.steps || [])
      .map((s) => s.step + " " + s.seconds.toFixed(1) + " s").join(", ") + "; chose " + chosen.method +
      (chosen.n_components ? ", " + chosen.n_components + " components" : "") +
      (chosen.second_stage ? " + " + chosen.second_stage : "") + "; click a picture for its full size";
    showMessage("");
  } catch (error) {
    status.textContent = fail("denoise " + file.name, error);
  } finally {
    running = null;
    form.querySelector("button[type=submit]").disabled = false;
    $("photo-cancel").disabled = true;
  }
}

async function cancel() {
  if (!running) return;
  $("photo-cancel").disabled = true;
  try {
    await cancelImageJob(running);
  } catch (error) {
    $("photo-status").textContent = fail("cancel", error);
  }
}

export function installPhoto() {
  $("photo-form").addEventListener("submit", denoise);
  $("photo-cancel").addEventListener("click", cancel);
}
