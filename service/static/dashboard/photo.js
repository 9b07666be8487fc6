// Denoising a photograph with nothing but the photograph (POST /v1/denoise-image): one background image job
// per click, its progress (step, units done, seconds, the step's time left) read every second, its answer
// fetched once completed, the job's record deleted after; a cancel button while it runs.

import { call } from "./api.js";
import { $, fail, showBlob, showMessage } from "./ui.js";

const PROGRESS_MS = 1000; // how often the job's progress is read

let running = null; // the job now running, if any

function progressLine(state, size) {
  const units = state.total ? " " + state.done + "/" + state.total : "";
  const left = state.step_left_s == null ? "" : ", about " + Math.ceil(state.step_left_s) + " s left in this step";
  return "denoising " + size + ": " + state.phase + units + ", " + state.elapsed_s.toFixed(1) + " s" + left;
}

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
  const job = "dashboard-photo-" + Date.now().toString(36) + "-" + Math.floor(Math.random() * 1e6).toString(36);
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
    let state = await (await call("/v1/denoise-image?background=true&job=" + encodeURIComponent(job),
      { method: "POST", headers: { "Content-Type": "image/png" }, body: file })).json();
    while (state.status === "running") {
      await new Promise((resolve) => setTimeout(resolve, PROGRESS_MS));
      state = await (await call("/v1/image-jobs/" + encodeURIComponent(job), { cache: "no-store" })).json();
      bar.value = state.total ? state.done / state.total : 0;
      status.textContent = progressLine(state, size);
    }
    if (state.status !== "completed") {
      status.textContent = "denoising " + size + " " + state.status + (state.error ? ": " + state.error : "");
      return;
    }
    const answer = await call("/v1/image-jobs/" + encodeURIComponent(job) + "/result", { cache: "no-store" });
    const chosen = JSON.parse(answer.headers.get("X-KPCA-Chosen") || "{}");
    showBlob("photo-after", await answer.blob());
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
    call("/v1/image-jobs/" + encodeURIComponent(job), { method: "DELETE" }).catch(() => {}); // kept no longer
  }
}

async function cancel() {
  if (!running) return;
  $("photo-cancel").disabled = true;
  try {
    await call("/v1/image-jobs/" + encodeURIComponent(running) + "/cancel", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
  } catch (error) {
    $("photo-status").textContent = fail("cancel", error);
  }
}

export function installPhoto() {
  $("photo-form").addEventListener("submit", denoise);
  $("photo-cancel").addEventListener("click", cancel);
}
