// The convergence chart: one value per pass on a log scale, drawn on a <canvas>, one line per fit (several
// fits compared on one chart get a colour each and a legend). Cost O(points) per draw.

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
// of {label, points} (one line each, coloured from COLOURS, with a legend); values > 0 are plotted.
export function drawChart(canvas, series, passes) {
  const lines = series.length && series[0].points ? series : [{ label: null, points: series }];
  const points = lines.flatMap((line) => line.points);
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
  // the whole fit on the x axis, unless it is long: then a quarter more than the passes seen so far
  const seen = Math.max(1, ...points.map((p) => p.pass));
  const lastPass = Math.max(seen, passes > 50 ? Math.min(passes, Math.max(10, Math.ceil(seen * 1.25))) : passes || 1);
  ctx.strokeStyle = "#999";
  ctx.strokeRect(MARGIN.left, MARGIN.top, plotW, plotH);
  ctx.fillStyle = "#555";
  ctx.textAlign = "center";
  ctx.fillText("pass", MARGIN.left + plotW / 2, height - 4);
  ctx.save();
  ctx.translate(12, MARGIN.top + plotH / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.fillText("convergence (log scale)", 0, 0);
  ctx.restore();
  const x = (pass) => MARGIN.left + (lastPass === 1 ? plotW / 2 : ((pass - 1) / (lastPass - 1)) * plotW);
  const rough = Math.max(1, lastPass / 10);
  const unit = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * unit).find((v) => v >= rough);
  for (let pass = step === 1 ? 1 : step; pass <= lastPass; pass += step) {
    ctx.fillText(String(pass), x(pass), MARGIN.top + plotH + 15);
  }
  if (step > 1) ctx.fillText("1", x(1), MARGIN.top + plotH + 15);
  if (!shown.length) {
    ctx.fillText(points.length ? "no figure above 0 to draw on a log scale: exact to rounding" : "waiting for the first pass",
                 MARGIN.left + plotW / 2, MARGIN.top + plotH / 2);
    return;
  }

  let low = Math.min(...shown.map((p) => p.value));
  let high = Math.max(...shown.map((p) => p.value));
  if (high / low < 10) {
    const middle = Math.sqrt(high * low);
    low = Math.min(low, middle / Math.sqrt(10));
    high = Math.max(high, middle * Math.sqrt(10));
  }
  const pad = 0.06 * (Math.log10(high) - Math.log10(low)); // points clear of the frame
  const lo = Math.log10(low) - pad, hi = Math.log10(high) + pad;
  const y = (value) => MARGIN.top + plotH - ((Math.log10(value) - lo) / (hi - lo)) * plotH;
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
    const drawn = line.points.filter((p) => Number.isFinite(p.value) && p.value > 0);
    ctx.strokeStyle = ctx.fillStyle = colour;
    ctx.lineWidth = 2;
    ctx.beginPath();
    drawn.forEach((p, i) => (i ? ctx.lineTo(x(p.pass), y(p.value)) : ctx.moveTo(x(p.pass), y(p.value))));
    ctx.stroke();
    for (const p of drawn) {
      ctx.beginPath();
      ctx.arc(x(p.pass), y(p.value), 3, 0, 2 * Math.PI);
      ctx.fill();
    }
    if (line.label) { // the legend, top right inside the frame
      ctx.textAlign = "right";
      ctx.fillText(line.label + " \u2014", MARGIN.left + plotW - 6, MARGIN.top + 14 + 15 * k);
    }
  });
  ctx.lineWidth = 1;
}
