// Several fits' convergence on one chart (#/compare): tick the models to compare; each is one line of its
// convergence figure per pass (log scale), with a table of where each ended. Running fits are re-read
// with the lists.

import { getJson } from "./api.js";
import { COLOURS, drawChart } from "./chart.js";
import { onLists } from "./lists.js";
import { $, ACTIVE, describe, el, emptyRow, number, seconds, statusBadge } from "./ui.js";

const chosen = new Set();
const records = new Map();

async function load(name) {
  try {
    records.set(name, await getJson("/v1/models/" + encodeURIComponent(name)));
  } catch (error) {
    records.delete(name);
    chosen.delete(name);
    $("compare-status").textContent = name + ": " + describe(error);
  }
}

function draw() {
  const shown = [...chosen].filter((name) => records.has(name)).map((name) => records.get(name));
  const series = shown.map((r) => ({ label: r.name, points: r.history.map((h) => ({ pass: h.pass, value: h.convergence.value })) }));
  const passes = Math.max(1, ...shown.map((r) => (r.progress ? r.progress.passes : r.history.length)));
  const canvas = $("compare-chart");
  canvas.dataset.series = String(series.length);
  drawChart(canvas, series, passes);
  const metrics = [...new Set(shown.flatMap((r) => r.history.map((h) => h.convergence.metric)))];
  $("compare-metric").textContent = metrics.length ? "figure: " + metrics.join(", ") +
    (metrics.length > 1 ? " (different figures: compare with care)" : "") : "tick two or more models";
  $("compare-table").tBodies[0].replaceChildren(...shown.map((r, k) => {
    const last = r.history[r.history.length - 1];
    return el("tr", {}, el("td", {}, el("span", { className: "swatch", style: "background:" + COLOURS[k % COLOURS.length] }), " " + r.name),
      el("td", {}, statusBadge(r.status)), el("td", { textContent: r.solver }), el("td", { textContent: r.history.length }),
      el("td", { textContent: last ? number(last.convergence.value) : "-" }), el("td", { textContent: last ? seconds(last.elapsed_s) : "-" }));
  }));
}

async function toggle(name, on) {
  if (on) {
    chosen.add(name);
    await load(name);
  } else {
    chosen.delete(name);
  }
  draw();
}

function render({ models }) {
  const fitted = models.filter((m) => m.progress && m.progress.pass > 0);
  const boxes = fitted.map((m) => {
    const box = el("input", { type: "checkbox", checked: chosen.has(m.name), value: m.name });
    box.addEventListener("change", () => toggle(m.name, box.checked));
    return el("label", { className: "choice" }, box, " " + m.name + " ", statusBadge(m.status),
              el("small", { textContent: " " + m.solver + ", " + m.dataset }));
  });
  $("compare-choices").replaceChildren(...(boxes.length ? boxes : [el("p", { className: "small", textContent: "no model has a finished pass yet" })]));
  for (const name of [...chosen]) if (!models.some((m) => m.name === name)) { chosen.delete(name); records.delete(name); }
  const active = [...chosen].filter((name) => ACTIVE.includes((models.find((m) => m.name === name) || {}).status));
  Promise.all(active.map(load)).then(draw);
}

export function installCompare() {
  onLists(render);
  $("compare-table").tBodies[0].replaceChildren(emptyRow(6, ""));
  window.addEventListener("resize", () => chosen.size && draw());
}

export { draw as drawComparison };
