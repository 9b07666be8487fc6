// The kpca-stream dashboard: four views chosen by the address's #fragment (#/datasets, #/models,
// #/clusterings, #/compare; #/models/NAME opens a model's page), the API key, the lists refreshed every
// few seconds. Every call goes through api.js (the key, the service's errors shown verbatim).

import { apiKey, onKeyNeeded, setApiKey } from "./api.js";
import { clusteringCatalogue, closeClustering, installClusterings, openClustering } from "./clusterings.js";
import { drawComparison, installCompare } from "./compare.js";
import { installDatasets, openDataset } from "./datasets.js";
import { installDenoise } from "./denoise.js";
import { REFRESH_MS, lists, refresh } from "./lists.js";
import { closeModel, installModelView, openModel } from "./model-view.js";
import { installModels, loadCatalogue } from "./models.js";
import { installPhoto } from "./photo.js";
import { $, installViewer, showMessage } from "./ui.js";

const VIEWS = ["datasets", "models", "clusterings", "compare"];

// ---- the API key --------------------------------------------------------------------------------

let askedForKey = false;

onKeyNeeded(() => {
  if (!askedForKey) $("api-key").focus(); // once per key: the periodic refresh must not steal focus
  askedForKey = true;
  $("key-status").textContent = apiKey() ? "this key was refused: enter another" : "this service needs an API key";
  $("key-status").className = "error";
});

$("key-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  setApiKey($("api-key").value.trim());
  askedForKey = false;
  $("key-status").textContent = apiKey() ? "key set for this tab" : "no key";
  $("key-status").className = "small";
  showMessage("");
  await catalogue();
  await refresh();
  route(true);
});

// ---- views ----------------------------------------------------------------------------------------

function route(again) {
  const [, view, ...rest] = location.hash.split("/");
  const name = rest.length ? decodeURIComponent(rest.join("/")) : null;
  const current = VIEWS.includes(view) ? view : (lists.models.length || lists.datasets.length ? "models" : "datasets");
  for (const v of VIEWS) {
    $("view-" + v).hidden = v !== current;
    document.querySelector(`#tabs a[data-view=${v}]`).classList.toggle("current", v === current);
  }
  document.title = "kpca-stream: " + current + (name ? " " + name : "");
  if (current === "models" && name) openModel(name, again);
  else closeModel();
  if (current === "clusterings" && name) openClustering(name);
  else closeClustering();
  if (current === "datasets" && name) openDataset(name);
  if (current === "compare") drawComparison();
}

async function catalogue() {
  await loadCatalogue();
  clusteringCatalogue();
}

window.addEventListener("hashchange", () => route(false));

// ---- start ------------------------------------------------------------------------------------------

$("api-key").value = apiKey();
installViewer();
installDatasets();
installModels();
installModelView();
installDenoise();
installPhoto();
installClusterings();
installCompare();
catalogue().then(refresh).then(() => route(false));
setInterval(refresh, REFRESH_MS);
