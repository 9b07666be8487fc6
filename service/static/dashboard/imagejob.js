// A PNG sent as a background image job (POST ...denoise-image?background=true&job=NAME): its progress read
// every second until it ends, then its answer (GET /v1/image-jobs/NAME/result) and what it chose; the job's
// record deleted once read. What the denoising forms share.

import { call } from "./api.js";

const PROGRESS_MS = 1000; // how often a running job's progress is read

// A new job name: the form's prefix, the time and a random part.
export function jobName(prefix) {
  return prefix + "-" + Date.now().toString(36) + "-" + Math.floor(Math.random() * 1e6).toString(36);
}

// "tuning 4/10, 3.2 s, about 5 s left in this step" for a running job's record.
export function progressText(state) {
  const units = state.total ? " " + state.done + "/" + state.total : "";
  const left = state.step_left_s == null ? "" : ", about " + Math.ceil(state.step_left_s) + " s left in this step";
  return state.phase + units + ", " + state.elapsed_s.toFixed(1) + " s" + left;
}

// Send `file` to `path` (a denoise-image route, its query without job and background) as job `job`, call
// `onProgress(state)` after each poll, and resolve to { state, blob, chosen } once completed; an ended job that
// did not complete resolves with a null blob. The record is deleted either way once the job has ended.
export async function runImageJob(path, file, job, onProgress) {
  const sep = path.includes("?") ? "&" : "?";
  let state = await (await call(path + sep + "background=true&job=" + encodeURIComponent(job),
    { method: "POST", headers: { "Content-Type": "image/png" }, body: file })).json();
  try {
    while (state.status === "running") {
      await new Promise((resolve) => setTimeout(resolve, PROGRESS_MS));
      state = await (await call("/v1/image-jobs/" + encodeURIComponent(job), { cache: "no-store" })).json();
      onProgress(state);
    }
    if (state.status !== "completed") return { state, blob: null, chosen: {} };
    const answer = await call("/v1/image-jobs/" + encodeURIComponent(job) + "/result", { cache: "no-store" });
    return { state, blob: await answer.blob(), chosen: JSON.parse(answer.headers.get("X-KPCA-Chosen") || "{}") };
  } finally {
    if (state.status !== "running") {
      call("/v1/image-jobs/" + encodeURIComponent(job), { method: "DELETE" }).catch(() => {}); // kept no longer
    }
  }
}

// Ask the running job `job` to stop at its next tile or band.
export function cancelImageJob(job) {
  return call("/v1/image-jobs/" + encodeURIComponent(job) + "/cancel",
    { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
}
