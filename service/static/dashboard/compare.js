// Several fits on one chart (#/compare): tick the models to compare; each is one line of one figure (the excess
// error, or the relative residual: one at a time, they are not on one scale) per pass or per second, with a log
// scale for x on request and values at or below 0 drawn on the bottom edge, and a table of where each ended.
// Running fits are re-read with the lists.

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

// A pass's value of the chosen figure: the recorded figure when it is that one, the residual beside it otherwise
function figure(h, which) {
  const c = h.convergence || {};
  if (which === "residual") return c.residual !== undefined && c.residual !== null ? c.residual : (c.metric === "residual" ? c.value : null);
  return c.metric === which ? c.value : null;
}

function draw() {
  const shown = [...chosen].filter((name) => records.has(name)).map((name) => records.get(name));
  const which = $("compare-figure").value, byTime = $("compare-x").value === "seconds";
  const series = shown.map((r) => ({ label: r.name, points: r.history.map((h) => ({ pass: h.pass, x: h.elapsed_s, value: figure(h, which) }))
    .filter((p) => p.value !== null && p.value !== undefined) }));
  const passes = Math.max(1, ...shown.map((r) => Math.max(r.history.length, r.params && r.params.passes ? r.params.passes : 0)));
  const canvas = $("compare-chart");
  canvas.dataset.series = String(series.length);
  canvas.dataset.points = String(series.reduce((n, s) => n + s.points.length, 0));
  canvas.dataset.x = (byTime ? "seconds" : "pass") + ($("compare-logx").checked ? " log" : "");
  const name = $("compare-figure").selectedOptions[0].textContent;
  drawChart(canvas, series, passes, { x: byTime ? "seconds" : "pass", logX: $("compare-logx").checked, yLabel: name.split(" (")[0] });
  const without = series.filter((s) => !s.points.length).map((s) => s.label);
  $("compare-metric").textContent = shown.length ? "figure: " + name + (without.length ? "; none recorded by " + without.join(", ") : "")
    : "tick two or more models";
  $("compare-last").textContent = "last " + name.split(" (")[0];
  $("compare-table").tBodies[0].replaceChildren(...shown.map((r, k) => {
    const last = r.history[r.history.length - 1];
    const value = last ? figure(last, which) : null;
    return el("tr", {}, el("td", {}, el("span", { className: "swatch", style: "background:" + COLOURS[k % COLOURS.length] }), " " + r.name),
      el("td", {}, statusBadge(r.status)), el("td", { textContent: r.solver }), el("td", { textContent: r.history.length }),
      el("td", { textContent: value === null || value === undefined ? "-" : number(value) }),
      el("td", { textContent: last ? seconds(last.elapsed_s) : "-" }));
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
  for (const id of ["compare-figure", "compare-x", "compare-logx"]) $(id).addEventListener("change", draw);
  $("compare-table").tBodies[0].replaceChildren(emptyRow(6, ""));
  window.addEventListener("resize", () => chosen.size && draw());
}

export { draw as drawComparison };
