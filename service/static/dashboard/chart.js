// The convergence chart: one value per pass (or per second) on a log scale, drawn on a <canvas>, one line per
// fit (several fits compared on one chart get a colour each and a legend). A value at or below 0 (a figure
// at rounding level) is drawn on the bottom edge as a hollow marker, said in the legend, not dropped.
// Cost O(points) per draw.

const MARGIN = { left: 72, right: 16, top: 14, bottom: 34 };

function logTicks(low, high) {
  // powers of ten in [low, high]; with fewer than two, also 2x and 5x multiples
  const ticks = [];
  for (let e = Math.floor(Math.log10(low)); e <= Math.ceil(Math.log10(high)); e++) {
    for (const m of [1, 2, 5]) ticks.push({ value: m * 10 ** e, major: m === 1 });
  }
  const inside = ticks.filter((t) => t.value >= low * 0.999 && t.value <= high * 1.001);
  return inside.filter((t) => t.major).length >= 2 ? inside.filter((t) => t.major) : inside;
}

function label(value) {
  return value >= 0.01 && value < 1e4 ? String(+value.toPrecision(3)) : value.toExponential(0);
}

export const COLOURS = ["#1565c0", "#c62828", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#5d4037", "#ad1457"];

// Draw `series` against passes 1..max(passes, last pass): an array of points [{pass, value}] (one line), or
// of {label, points} (one line each, coloured from COLOURS, with a legend). `options`: `x` ("pass", the
// default, or "seconds": each point's `x` is then its time), `logX` (a log scale for x), `yLabel`.
export function drawChart(canvas, series, passes, options = {}) {
  const byTime = options.x === "seconds";
  const logX = Boolean(options.logX);
  const lines = series.length && series[0].points ? series : [{ label: null, points: series }];
  const at = (p) => (byTime ? p.x : p.pass);
  const points = lines.flatMap((line) => line.points).filter((p) => Number.isFinite(at(p)) && (!logX || at(p) > 0));
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || canvas.width;
  const height = canvas.clientHeight || canvas.height;
  if (canvas.width !== Math.round(width * ratio)) canvas.width = Math.round(width * ratio);
  if (canvas.height !== Math.round(height * ratio)) canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  ctx.font = "12px system-ui, sans-serif";
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;

  const shown = points.filter((p) => Number.isFinite(p.value) && p.value > 0);
  const floored = points.filter((p) => Number.isFinite(p.value) && p.value <= 0);
  // x: passes 1..n (the whole fit, unless it is long: then a quarter more than the passes seen), or seconds
  const seen = Math.max(byTime ? 1e-3 : 1, ...points.map(at));
  const first = logX ? Math.min(...points.map(at).filter((v) => v > 0), seen) : (byTime ? 0 : 1);
  const last = byTime || logX ? seen : Math.max(seen, passes > 50 ? Math.min(passes, Math.max(10, Math.ceil(seen * 1.25)))
    : passes || 1);
  ctx.strokeStyle = "#999";
  ctx.strokeRect(MARGIN.left, MARGIN.top, plotW, plotH);
  ctx.fillStyle = "#555";
  ctx.textAlign = "center";
  ctx.fillText((byTime ? "seconds" : "pass") + (logX ? " (log scale)" : ""), MARGIN.left + plotW / 2, height - 4);
  ctx.save();
  ctx.translate(12, MARGIN.top + plotH / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.fillText((options.yLabel || "convergence") + " (log scale)", 0, 0);
  ctx.restore();
  const scale = (v) => (logX ? Math.log10(v) : v);
  const x = (v) => MARGIN.left + (last === first ? plotW / 2 : ((scale(v) - scale(first)) / (scale(last) - scale(first))) * plotW);
  if (logX) {
    for (const tick of logTicks(first, last)) ctx.fillText(label(tick.value), x(tick.value), MARGIN.top + plotH + 15);
  } else {
    const rough = Math.max(byTime ? 1e-9 : 1, (last - first) / 10);
    const unit = 10 ** Math.floor(Math.log10(rough));
    const step = [1, 2, 5, 10].map((m) => m * unit).find((v) => v >= rough);
    for (let v = byTime ? 0 : (step === 1 ? 1 : step); v <= last + 1e-9; v += step) {
      ctx.fillText(String(+v.toPrecision(3)), x(v), MARGIN.top + plotH + 15);
    }
    if (!byTime && step > 1) ctx.fillText("1", x(1), MARGIN.top + plotH + 15);
  }
  if (!shown.length && !floored.length) {
    ctx.fillText("waiting for the first pass", MARGIN.left + plotW / 2, MARGIN.top + plotH / 2);
    return;
  }

  let low = shown.length ? Math.min(...shown.map((p) => p.value)) : 1e-16;
  let high = shown.length ? Math.max(...shown.map((p) => p.value)) : 1e-15;
  if (high / low < 10) {
    const middle = Math.sqrt(high * low);
    low = Math.min(low, middle / Math.sqrt(10));
    high = Math.max(high, middle * Math.sqrt(10));
  }
  const pad = 0.06 * (Math.log10(high) - Math.log10(low)); // points clear of the frame
  const lo = Math.log10(low) - pad, hi = Math.log10(high) + pad;
  const y = (value) => (value > 0 ? MARGIN.top + plotH - ((Math.log10(value) - lo) / (hi - lo)) * plotH
    : MARGIN.top + plotH - 4); // at or below 0: on the bottom edge
  ctx.textAlign = "right";
  ctx.strokeStyle = "#e6e6e6";
  for (const tick of logTicks(10 ** lo, 10 ** hi)) {
    const ty = y(tick.value);
    ctx.beginPath();
    ctx.moveTo(MARGIN.left, ty);
    ctx.lineTo(MARGIN.left + plotW, ty);
    ctx.stroke();
    ctx.fillText(label(tick.value), MARGIN.left - 6, ty + 4);
  }
  lines.forEach((line, k) => {
    const colour = COLOURS[k % COLOURS.length];
    const drawn = line.points.filter((p) => Number.isFinite(p.value) && Number.isFinite(at(p)) && (!logX || at(p) > 0));
    ctx.strokeStyle = ctx.fillStyle = colour;
    ctx.lineWidth = 2;
    ctx.beginPath();
    drawn.forEach((p, i) => (i ? ctx.lineTo(x(at(p)), y(p.value)) : ctx.moveTo(x(at(p)), y(p.value))));
    ctx.stroke();
    for (const p of drawn) {
      ctx.beginPath();
      ctx.arc(x(at(p)), y(p.value), 3, 0, 2 * Math.PI);
      if (p.value > 0) ctx.fill();
      else ctx.stroke(); // hollow: at or below 0
    }
    if (line.label) { // the legend, top right inside the frame
      ctx.textAlign = "right";
      ctx.fillText(line.label + " \u2014", MARGIN.left + plotW - 6, MARGIN.top + 14 + 15 * k);
    }
  });
  if (floored.length) {
    ctx.fillStyle = "#555";
    ctx.textAlign = "left";
    ctx.fillText("\u25cb on the bottom edge: 0 or below (rounding)", MARGIN.left + 6, MARGIN.top + plotH - 10);
  }
  ctx.lineWidth = 1;
}
