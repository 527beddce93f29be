// Line charts as inline SVG (no library, nothing from a CDN): series of {time, value} points.
const NS = "http://www.w3.org/2000/svg";

function el(tag, attrs) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function valueText(v, unit) {
  const n = Math.abs(v) >= 100 ? Math.round(v).toLocaleString("en") : Number(v.toPrecision(3)).toString();
  return `${n}${unit}`;
}

function clock(t) {
  return new Date(t * 1000).toTimeString().slice(0, 8);
}

/** A line chart of series of {time (s since the epoch), value}: a time axis (local clock), a
 * value axis, and on hover a cursor with the time and each series' value there. */
export function lineChart(title, series, { width = 420, height = 160, unit = "/s" } = {}) {
  const svg = el("svg", { class: "chart", width, height, viewBox: `0 0 ${width} ${height}`,
    role: "img", "aria-label": title });
  const pad = { l: 52, r: 10, t: 20, b: 30 };
  const all = series.flatMap((s) => s.points);
  const label = el("text", { x: pad.l, y: 13, class: "title" });
  label.textContent = title;
  svg.append(label);
  if (all.length < 1) {
    const none = el("text", { x: width / 2 - 40, y: height / 2 });
    none.textContent = "no samples yet";
    svg.append(none);
    return svg;
  }
  const t1 = Math.max(...all.map((p) => p.time));
  const t0 = Math.min(...all.map((p) => p.time), t1 - 30); // at least the last 30 s
  const vmax = Math.max(...all.map((p) => p.value)) || 1; // all zero: an axis to 1
  const plotW = width - pad.l - pad.r;
  const x = (t) => pad.l + ((t - t0) / (t1 - t0)) * plotW;
  const y = (v) => height - pad.b - (v / vmax) * (height - pad.t - pad.b);
  // value axis: 0, half and the top, with grid lines
  for (const v of [0, vmax / 2, vmax]) {
    svg.append(el("line", { x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v), class: "grid" }));
    const tick = el("text", { x: pad.l - 4, y: y(v) + 3, "text-anchor": "end", class: "y-tick" });
    tick.textContent = valueText(v, unit);
    svg.append(tick);
  }
  // time axis: the local clock at four even steps
  svg.append(el("line", { x1: pad.l, x2: width - pad.r, y1: height - pad.b, y2: height - pad.b, class: "axis" }));
  for (let i = 0; i <= 3; i += 1) {
    const t = t0 + ((t1 - t0) * i) / 3;
    const tick = el("text", { x: x(t), y: height - pad.b + 13, "text-anchor": i === 0 ? "start" : i === 3 ? "end" : "middle", class: "x-tick" });
    tick.textContent = clock(t);
    svg.append(tick);
  }
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const d = s.points.map((p, j) => `${j ? "L" : "M"}${x(p.time).toFixed(1)},${y(p.value).toFixed(1)}`).join("");
    svg.append(el("path", { d, class: `line${i + 1}` }));
    const last = s.points[s.points.length - 1];  // the latest value, also when it is the only one
    svg.append(el("circle", { cx: x(last.time).toFixed(1), cy: y(last.value).toFixed(1), r: 2.5, class: `dot${i + 1}` }));
    const key = el("text", { x: width - pad.r - (series.length - i) * 70, y: 13 });
    key.textContent = s.name;
    key.setAttribute("class", `key${i + 1}`);
    svg.append(key);
  });
  // hover: the sample nearest the pointer, its time and every series' value
  const times = [...new Set(all.map((p) => p.time))].sort((a, b) => a - b);
  const cursor = el("line", { y1: pad.t, y2: height - pad.b, class: "cursor", visibility: "hidden" });
  const tip = el("text", { y: pad.t + 10, class: "tip", visibility: "hidden" });
  const area = el("rect", { x: pad.l, y: pad.t, width: plotW, height: height - pad.t - pad.b, class: "hover-area" });
  svg.append(cursor, tip, area);
  const show = (event) => {
    const box = svg.getBoundingClientRect();
    const px = ((event.clientX - box.left) / box.width) * width;
    const wanted = t0 + ((px - pad.l) / plotW) * (t1 - t0);
    const t = times.reduce((best, c) => (Math.abs(c - wanted) < Math.abs(best - wanted) ? c : best), times[0]);
    const parts = series.map((s) => {
      const p = s.points.find((q) => q.time === t);
      return p ? `${s.name} ${valueText(p.value, unit)}` : null;
    }).filter(Boolean);
    cursor.setAttribute("x1", x(t));
    cursor.setAttribute("x2", x(t));
    tip.textContent = `${clock(t)} · ${parts.join(" · ")}`;
    const right = x(t) > pad.l + plotW / 2;
    tip.setAttribute("x", right ? x(t) - 4 : x(t) + 4);
    tip.setAttribute("text-anchor", right ? "end" : "start");
    cursor.setAttribute("visibility", "visible");
    tip.setAttribute("visibility", "visible");
  };
  area.addEventListener("mousemove", show);
  area.addEventListener("mouseleave", () => {
    cursor.setAttribute("visibility", "hidden");
    tip.setAttribute("visibility", "hidden");
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
