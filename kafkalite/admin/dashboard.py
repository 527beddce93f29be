"""The dashboard page (GET /): one static HTML page whose script reads the admin API's own JSON
routes (/cluster, /topics, /topics/{name}, /groups, /groups/{id}) every few seconds and shows
them as tables. No server-side rendering, no external assets."""

DASHBOARD_HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kafkalite</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 2em; color: #222; }
  h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
  table { border-collapse: collapse; margin: .5em 0; }
  th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; }
  th { background: #f3f3f3; } .muted { color: #888; } .bad { color: #b00; font-weight: bold; }
</style>
</head>
<body>
<h1>kafkalite <span id="cluster" class="muted"></span></h1>
<h2>Brokers</h2><table id="brokers"></table>
<h2>Topics</h2><table id="topics"></table>
<h2>Consumer groups</h2><table id="groups"></table>
<p class="muted">Refreshed every 5 s from this broker's admin API
(<a href="/openapi.json">OpenAPI</a>, <a href="/metrics">metrics</a>).</p>
<script>
const text = (v) => (v === null || v === undefined ? "-" : String(v));
function fill(id, header, rows) {
  const table = document.getElementById(id);
  table.replaceChildren();
  const head = table.insertRow();
  for (const h of header) { const th = document.createElement("th"); th.textContent = h; head.appendChild(th); }
  for (const row of rows) {
    const tr = table.insertRow();
    for (const cell of row) {
      const td = tr.insertCell();
      if (cell && cell.bad) { td.textContent = cell.text; td.className = "bad"; }
      else td.textContent = text(cell);
    }
  }
}
async function json(path) {
  const r = await fetch(path);
  return r.ok ? r.json() : null;
}
async function refresh() {
  const cluster = await json("/cluster");
  if (cluster) {
    document.getElementById("cluster").textContent =
      `cluster ${cluster.cluster_id}, controller ${cluster.controller.broker_id} (epoch ${cluster.controller.epoch})`;
    const dirs = (b) => (b.offline_log_dirs === null || b.offline_log_dirs === undefined ? "-"
      : b.offline_log_dirs.length ? { bad: true, text: b.offline_log_dirs.join(", ") } : "none");
    const parts = (b) => (b.offline_partitions ? { bad: true, text: b.offline_partitions }
      : b.offline_partitions);
    fill("brokers", ["id", "host", "port", "rack", "controller", "offline log dirs",
      "offline partitions"],
      cluster.brokers.map((b) => [b.id, b.host, b.port, b.rack, b.is_controller ? "yes" : "",
        dirs(b), parts(b)]));
  }
  const topics = (await json("/topics")) || [];
  const rows = [];
  for (const t of topics) {
    const d = await json("/topics/" + encodeURIComponent(t.name));
    for (const p of (d ? d.partitions : [])) {
      const under = p.isr.length < p.replicas.length;
      rows.push([t.name, p.partition, p.leader < 0 ? { bad: true, text: "none" } : p.leader,
        p.replicas.join(","), under ? { bad: true, text: p.isr.join(",") } : p.isr.join(","),
        p.log_start_offset, p.high_watermark, p.log_end_offset, p.size_bytes]);
    }
  }
  fill("topics", ["topic", "partition", "leader", "replicas", "isr", "log start", "high watermark",
    "log end", "bytes"], rows);
  const groups = (await json("/groups")) || [];
  const grows = [];
  for (const g of groups) {
    const d = await json("/groups/" + encodeURIComponent(g.group_id));
    grows.push([g.group_id, g.state, d ? d.members.length : "-", d ? d.total_lag : "-"]);
  }
  fill("groups", ["group", "state", "members", "total lag"], grows);
}
refresh();
setInterval(refresh, 5000);
</script>
</body>
</html>
"""
