// Line charts as inline SVG (no library): series of {time, value} points.
const NS = "http://www.w3.org/2000/svg";

function el(tag, attrs) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

export function lineChart(title, series, { width = 420, height = 140, unit = "/s" } = {}) {
  const svg = el("svg", { class: "chart", width, height, viewBox: `0 0 ${width} ${height}`,
    role: "img", "aria-label": title });
  const pad = { l: 46, r: 8, t: 18, b: 18 };
  const all = series.flatMap((s) => s.points);
  const label = el("text", { x: pad.l, y: 12 });
  label.textContent = title;
  svg.append(label);
  if (all.length < 1) {
    const none = el("text", { x: width / 2 - 40, y: height / 2 });
    none.textContent = "no samples yet";
    svg.append(none);
    return svg;
  }
  const t0 = Math.min(...all.map((p) => p.time));
  const t1 = Math.max(...all.map((p) => p.time), t0 + 1);
  const vmax = Math.max(...all.map((p) => p.value), 1e-9);
  const x = (t) => pad.l + ((t - t0) / (t1 - t0)) * (width - pad.l - pad.r);
  const y = (v) => height - pad.b - (v / vmax) * (height - pad.t - pad.b);
  const top = el("text", { x: 2, y: pad.t + 4 });
  top.textContent = `${vmax >= 100 ? Math.round(vmax) : vmax.toPrecision(2)}${unit}`;
  const zero = el("text", { x: 2, y: height - pad.b });
  zero.textContent = "0";
  const span = el("text", { x: width - 70, y: height - 4 });
  span.textContent = `last ${Math.round((t1 - t0) / 60)} min`;
  svg.append(top, zero, span);
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const d = s.points.map((p, j) => `${j ? "L" : "M"}${x(p.time).toFixed(1)},${y(p.value).toFixed(1)}`).join("");
    svg.append(el("path", { d, class: `line${i + 1}` }));
    const last = s.points[s.points.length - 1];  // the latest value, also when it is the only one
    svg.append(el("circle", { cx: x(last.time).toFixed(1), cy: y(last.value).toFixed(1), r: 2.5, class: `dot${i + 1}` }));
    const key = el("text", { x: width - 150 + i * 70, y: 12 });
    key.textContent = s.name;
    key.setAttribute("class", `key${i + 1}`);
    svg.append(key);
  });
  return svg;
}

export function sparkline(values, { width = 90, height = 22 } = {}) {
  const svg = el("svg", { width, height, class: "spark" });
  if (values.length < 2) return svg;
  const max = Math.max(...values, 1);
  const d = values.map((v, i) => `${i ? "L" : "M"}${((i / (values.length - 1)) * (width - 2) + 1).toFixed(1)},${(height - 2 - (v / max) * (height - 4)).toFixed(1)}`).join("");
  svg.append(el("path", { d, stroke: "#2f5fd0", fill: "none", "stroke-width": 1.3 }));
  return svg;
}
