// The three lists every view reads (data sets, models, clusterings), refreshed every REFRESH_MS and after
// every action; views subscribe with onLists(fn) and get {datasets, models, clusterings} on each refresh.

import { listAll } from "./api.js";
import { $, describe } from "./ui.js";

export const REFRESH_MS = 2000;
export const lists = { datasets: [], models: [], clusterings: [] };
const listeners = [];

export function onLists(fn) {
  listeners.push(fn);
}

let running = null;

// Read all three lists (one at a time, each page of each), then tell every view; concurrent calls share one.
export function refresh() {
  if (running) return running;
  running = (async () => {
    const errors = [];
    for (const kind of ["datasets", "models", "clusterings"]) {
      try {
        lists[kind] = await listAll("/v1/" + kind, kind);
      } catch (error) {
        errors.push(kind + ": " + describe(error));
      }
    }
    $("refreshed").textContent = errors.length ? errors.join("; ") : "lists refreshed " + new Date().toLocaleTimeString();
    $("refreshed").className = errors.length ? "error" : "small";
    for (const fn of listeners) {
      try {
        fn(lists);
      } catch (error) {
        console.error(error); // one view's bug must not stop the others
      }
    }
  })().finally(() => { running = null; });
  return running;
}

// The jobs (models and clusterings) fit on data set `name`.
export function usersOf(name) {
  return [...lists.models.filter((m) => m.dataset === name).map((m) => "model " + m.name),
          ...lists.clusterings.filter((c) => c.dataset === name).map((c) => "clustering " + c.name)];
}
