// The kafkalite console: a single page over the admin API. Pages are hash routes
// (#/, #/topics, #/topic/NAME, #/groups, #/group/ID, #/brokers, #/partitions?state=, #/actions,
// #/schemas, #/schema/SUBJECT, #/metrics);
// each renders its frame once (forms keep what is typed) and refreshes its live parts every
// REFRESH_MS. Lists are filtered and paged by the server, so 5,000 topics stay one page of 50.
import { authorization, call, del, enc, get, getPage, patch, post, setAuthorization, whenUnauthorized } from "/console/api.js";
import { lineChart, sparkline } from "/console/chart.js";
import { fmt, h } from "/console/dom.js";

const REFRESH_MS = 5000;
const PAGE = 50;
const main = document.getElementById("main");
const status = document.getElementById("status");
let timer = null;
let generation = 0;
let refreshNow = () => {}; // the current page's refresh, run again after an action succeeds

// ------------------------------------------------------------------ helpers

function cell(text, cls) { return h("td", { class: cls }, text); }
function num(v) { return h("td", { class: "num" }, fmt.num(v)); }
function table(id, headers, rows) {
  return h("table", { class: "grid", id },
    h("thead", {}, h("tr", {}, ...headers.map((x) => h("th", { class: x.startsWith("#") ? "num" : "" }, x.replace(/^#/, ""))))),
    h("tbody", {}, ...rows));
}
function message(kind, text) { return h("div", { class: `message ${kind}`, role: "status" }, text); }
function errorText(e) { return e && e.body && e.body.error ? `${e.body.error}: ${e.message}` : String(e.message || e); }
function replace(node, ...children) { node.replaceChildren(...children); return node; }
function brokerHealth(p) {
  if (p.offline) return h("span", { class: "pill bad" }, "offline");
  if (p.under_min_isr) return h("span", { class: "pill bad" }, "under min ISR");
  if (p.under_replicated) return h("span", { class: "pill warn" }, "under-replicated");
  return h("span", { class: "pill ok" }, "ok");
}

/** Ask before doing something that cannot be undone; resolves true when confirmed. */
export function confirmAction(title, text) {
  return new Promise((resolve) => {
    const done = (answer) => { box.remove(); resolve(answer); };
    const box = h("div", { class: "dialog", id: "confirm" },
      h("div", {}, h("h2", {}, title), h("p", {}, text),
        h("div", { class: "toolbar" },
          h("button", { class: "danger", id: "confirm-yes", onclick: () => done(true) }, "Yes, do it"),
          h("button", { class: "secondary", id: "confirm-no", onclick: () => done(false) }, "Cancel"))));
    document.body.append(box);
  });
}

async function act(out, what, fn) {
  replace(out, message("info", `${what}…`));
  try {
    const result = await fn();
    replace(out, message("info", `${what}: done`));
    refreshNow();
    return result;
  } catch (e) {
    replace(out, message("error", `${what}: ${errorText(e)}`));
    return undefined;
  }
}

function parseHash() {
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const parts = (path || "/").split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(query || "") };
}

// ------------------------------------------------------------------ overview

async function overviewPage() {
  const cards = h("div", { class: "cards", id: "overview-cards" });
  const brokers = h("div", { id: "overview-brokers" });
  const charts = h("div", { class: "charts", id: "overview-charts" });
  main.append(h("h1", {}, "Overview"), cards, h("h2", {}, "Brokers"), brokers,
    h("h2", {}, "Throughput (this broker)"), charts);
  return async () => {
    const [o, cluster, history] = await Promise.all([get("/overview"), get("/cluster"), get("/metrics/history")]);
    const card = (key, label, value, href, alert) => h("a", { class: `card${alert ? " alert" : ""}`, href, "data-count": key },
      h("div", { class: "value" }, fmt.num(value)), h("div", { class: "label" }, label));
    replace(cards,
      card("brokers", "brokers", o.brokers, "#/brokers"),
      card("topics", "topics", o.topics, "#/topics"),
      card("partitions", "partitions", o.partitions, "#/partitions?state=all"),
      card("under_replicated", "under-replicated", o.under_replicated, "#/partitions?state=under_replicated", o.under_replicated > 0),
      card("offline", "offline", o.offline, "#/partitions?state=offline", o.offline > 0),
      card("under_min_isr", "under min ISR", o.under_min_isr, "#/partitions?state=under_min_isr", o.under_min_isr > 0),
      card("groups", "consumer groups", o.groups, "#/groups"));
    replace(brokers, brokerTable(cluster, o.down_brokers));
    const b = history.broker;
    replace(charts,
      lineChart("messages in", [{ name: "msgs/s", points: b.map((p) => ({ time: p.time, value: p.messages_in_per_sec })) }]),
      lineChart("bytes in / out", [
        { name: "in", points: b.map((p) => ({ time: p.time, value: p.bytes_in_per_sec })) },
        { name: "out", points: b.map((p) => ({ time: p.time, value: p.bytes_out_per_sec })) }], { unit: " B/s" }),
      lineChart("consume (fetch bytes)", [{ name: "B/s", points: b.map((p) => ({ time: p.time, value: p.fetch_bytes_per_sec })) }], { unit: " B/s" }));
    status.textContent = `cluster ${o.cluster_id} · controller ${o.controller_id}`;
  };
}

function brokerTable(cluster, down = []) {
  const gone = down.map((id) => h("tr", { "data-broker": id }, cell(String(id)), cell("–"), cell("–"), cell(""),
    cell(h("span", { class: "pill bad" }, "down")), cell("–")));
  return table("brokers", ["id", "address", "rack", "role", "state", "offline log dirs"],
    [...cluster.brokers.map((b) => h("tr", { "data-broker": b.id },
      cell(h("a", { href: `#/brokers` }, String(b.id))),
      cell(`${b.host}:${b.port}`), cell(b.rack || "–"),
      cell(b.is_controller ? h("span", { class: "pill" }, "controller") : ""),
      cell(h("span", { class: "pill ok" }, "up")),
      cell(b.offline_log_dirs === null ? h("a", { href: "#/brokers" }, "see Brokers")
        : b.offline_log_dirs.length ? h("span", { class: "bad" }, b.offline_log_dirs.join(", ")) : "none"))), ...gone]);
}

// ------------------------------------------------------------------ topics

async function topicsPage(query) {
  let offset = Number(query.get("offset") || 0);
  const search = h("input", { id: "topic-search", type: "search", placeholder: "filter by name", value: query.get("search") || "" });
  const internal = h("input", { id: "show-internal", type: "checkbox" });
  internal.checked = query.get("internal") === "true";
  const list = h("div", { id: "topic-list" });
  const pager = h("div", { class: "toolbar" });
  let refresh;
  const go = () => { offset = 0; refresh(); };
  search.addEventListener("input", go);
  internal.addEventListener("change", go);
  main.append(h("h1", {}, "Topics"),
    h("div", { class: "toolbar" }, search, h("label", {}, internal, " show internal topics"),
      h("a", { href: "#/actions" }, "create a topic…")), list, pager);
  let asked = 0;
  refresh = async () => {
    const mine = ++asked;
    const q = new URLSearchParams({ offset, limit: PAGE, internal: internal.checked });
    if (search.value) q.set("search", search.value);
    const [{ data, total }, history] = await Promise.all([getPage(`/topics?${q}`), get("/metrics/history")]);
    if (mine !== asked) return; // a later filter or page was asked for meanwhile: its answer wins
    const rate = (name) => { const s = history.topics[name]; return s && s.length ? s[s.length - 1].messages_in_per_sec : 0; };
    replace(list, table("topics", ["name", "#partitions", "#replication", "#size", "#msgs in", "health"],
      data.map((t) => h("tr", { "data-topic": t.name },
        cell(h("a", { href: `#/topic/${enc(t.name)}` }, t.name), t.internal ? "muted" : ""),
        num(t.partitions), num(t.replication_factor),
        h("td", { class: "num" }, fmt.bytes(t.size_bytes)), h("td", { class: "num" }, fmt.rate(rate(t.name))),
        cell(t.marked_for_deletion ? h("span", { class: "pill warn" }, "deleting")
          : t.offline ? h("span", { class: "pill bad" }, `${t.offline} offline`)
            : t.under_replicated ? h("span", { class: "pill warn" }, `${t.under_replicated} under-replicated`)
              : h("span", { class: "pill ok" }, "ok"))))));
    const last = Math.min(offset + PAGE, total);
    replace(pager,
      h("span", { id: "topic-count" }, total ? `${offset + 1}–${last} of ${fmt.num(total)}` : "no topics"),
      h("button", { class: "secondary", disabled: offset === 0, onclick: () => { offset = Math.max(0, offset - PAGE); refresh(); } }, "← previous"),
      h("button", { class: "secondary", id: "next-page", disabled: last >= total, onclick: () => { offset += PAGE; refresh(); } }, "next →"));
  };
  return refresh;
}

async function topicPage(name) {
  const head = h("div", { id: "topic-head" });
  const parts = h("div", { id: "partitions" });
  const charts = h("div", { class: "charts" });
  const groups = h("div", { id: "topic-groups" });
  const effective = h("div", { id: "effective-configs" });
  const configs = h("div", { id: "configs" });
  const out = h("div");
  main.append(h("h1", {}, "Topic ", h("code", {}, name)), head, out,
    h("h2", {}, "Partitions"), parts, h("h2", {}, "Consuming groups"), groups, h("h2", {}, "Rates"), charts,
    h("h2", {}, "Configs"), effective, configs, h("h2", {}, "Records"), recordBrowser(name),
    h("h2", {}, "Actions"), topicActions(name, out));
  let configsShown = false;
  return async () => {
    const [t, history, consumers] = await Promise.all([get(`/topics/${enc(name)}`), get(`/metrics/history?topic=${enc(name)}`),
      get(`/topics/${enc(name)}/groups`)]);
    const count = t.message_count === null ? "message count unknown (a leader did not answer)"
      : `${t.message_count_is_estimate ? "≈ " : ""}${fmt.num(t.message_count)} messages`;
    replace(head, h("p", { class: "muted" }, `id ${t.topic_id || "–"} · ${t.partitions.length} partitions · `,
      h("b", { id: "message-count" }, count),
      t.message_count_is_estimate ? " (an estimate: the topic is compacted, and offsets compaction removed are still counted)" : "",
      t.internal ? " · internal" : "", t.marked_for_deletion ? " · marked for deletion" : ""));
    replace(parts, table("partition-table", ["#partition", "leader", "replicas", "ISR", "#log start", "#end (HW)", "#LEO", "#size"],
      t.partitions.map((p) => h("tr", {},
        num(p.partition), cell(p.leader < 0 ? h("span", { class: "bad" }, "none") : String(p.leader)),
        cell(p.replicas.join(", ")),
        cell(p.isr.join(", "), p.isr.length < p.replicas.length ? "bad" : ""),
        num(p.log_start_offset), num(p.high_watermark), num(p.log_end_offset),
        h("td", { class: "num" }, fmt.bytes(p.size_bytes))))));
    replace(groups, consumers.length ? table("topic-group-table", ["group", "state", "#members", "#partitions", "#lag"], consumers.map((g) => h("tr", { "data-group": g.group_id },
      cell(h("a", { href: `#/group/${enc(g.group_id)}` }, g.group_id)), cell(g.state), num(g.members), num(g.partitions),
      h("td", { class: `num${g.lag ? " warn" : ""}` }, fmt.num(g.lag)))))
      : h("p", { class: "muted" }, "No group has committed offsets of this topic or has it assigned."));
    const series = history.topics[name] || [];
    replace(charts,
      lineChart("messages in", [{ name: "msgs/s", points: series.map((p) => ({ time: p.time, value: p.messages_in_per_sec })) }]),
      lineChart("bytes in", [{ name: "B/s", points: series.map((p) => ({ time: p.time, value: p.bytes_in_per_sec })) }], { unit: " B/s" }));
    if (!configsShown) {
      configsShown = true;
      replace(configs, configEditor(name, t.configs));
      try {
        const all = await get(`/topics/${enc(name)}/configs`);
        const source = (c) => h("span", { class: `pill${c.source === "DYNAMIC_TOPIC_CONFIG" ? " warn" : ""}` }, c.source);
        replace(effective, h("details", { open: true }, h("summary", {}, `Effective configs (${all.configs.length}), with where each value comes from`),
          table("effective-config-table", ["name", "value", "source"], all.configs.map((c) => h("tr", { "data-config": c.name },
            cell(h("code", {}, c.name)), cell(c.value === null ? h("span", { class: "muted" }, c.sensitive ? "(secret)" : "null") : c.value, "mono"), cell(source(c)))))));
      } catch (e) {
        replace(effective, message("error", `effective configs: ${errorText(e)}`));
      }
    }
  };
}

function configEditor(name, current) {
  const rows = h("tbody", {});
  const out = h("div");
  const addRow = (key = "", value = "") => {
    const k = h("input", { value: key, placeholder: "config name, e.g. retention.ms", class: "config-key" });
    const v = h("input", { value, placeholder: "value", class: "config-value" });
    const tr = h("tr", {}, cell(k), cell(v), cell(h("button", { class: "secondary", onclick: () => tr.remove() }, "remove")));
    rows.append(tr);
  };
  for (const [k, v] of Object.entries(current)) addRow(k, v);
  const save = async () => {
    const wanted = {};
    for (const tr of rows.children) {
      const key = tr.querySelector(".config-key").value.trim();
      if (key) wanted[key] = tr.querySelector(".config-value").value;
    }
    const changes = { ...wanted };
    for (const key of Object.keys(current)) if (!(key in wanted)) changes[key] = null;
    const result = await act(out, "Saving configs", () => patch(`/topics/${enc(name)}/config`, { configs: changes }));
    if (result) current = result.configs;
  };
  return h("div", { class: "panel" }, h("p", { class: "muted" }, "Overrides of this topic (others take the broker's defaults). Empty: none."),
    h("table", { class: "grid", id: "config-table" }, h("thead", {}, h("tr", {}, h("th", {}, "name"), h("th", {}, "value"), h("th", {}, ""))), rows),
    h("div", { class: "toolbar" }, h("button", { class: "secondary", onclick: () => addRow() }, "add override"),
      h("button", { id: "save-configs", onclick: save }, "save")), out);
}

/** Records of all partitions (or one) merged by time, newest first; seek by offset or time,
 * filter on key, value or headers (on the broker), a compact one-line view, and a form that
 * produces a test record. */
function recordBrowser(name) {
  const partition = h("input", { id: "rb-partition", type: "number", min: 0, placeholder: "all" });
  const mode = h("select", { id: "rb-mode" }, h("option", { value: "last" }, "newest records"),
    h("option", { value: "offset" }, "from offset"), h("option", { value: "timestamp" }, "from time"));
  const from = h("input", { id: "rb-from", placeholder: "offset", type: "number", min: 0 });
  const time = h("input", { id: "rb-time", type: "datetime-local", step: 1 });
  const filter = h("input", { id: "rb-filter", type: "search", placeholder: "key, value or header contains…" });
  const limit = h("input", { id: "rb-limit", type: "number", min: 1, max: 500, value: 50 });
  const compact = h("input", { id: "rb-compact", type: "checkbox" });
  const out = h("div", { id: "records-out" });
  const showMode = () => {
    from.hidden = mode.value !== "offset";
    time.hidden = mode.value !== "timestamp";
  };
  mode.addEventListener("change", showMode);
  showMode();
  let page = null;
  const asJson = (v) => { try { return JSON.stringify(JSON.parse(v.text), null, 2); } catch { return v.text; } };
  const shown = (v) => v === null ? h("span", { class: "muted" }, "null")
    : h("div", { class: "decoded", "data-encoding": v.encoding }, h("span", { class: "pill" }, v.encoding),
      v.schema_id !== null && v.schema_id !== undefined ? h("span", { class: "pill schema-ref" }, `schema ${v.schema_id}`,
        v.subject ? [" · ", h("a", { href: `#/schema/${enc(v.subject)}` }, v.subject)] : "") : "",
      v.truncated ? h("span", { class: "pill warn" }, `${fmt.bytes(v.size)}, cut`) : "",
      h("pre", { class: "value" }, v.encoding === "utf8" || v.encoding === "hex" ? v.text : asJson(v)));
  const oneLine = (v) => v === null ? h("span", { class: "muted" }, "null") : h("span", { class: "mono", title: v.text }, v.text.length > 120 ? `${v.text.slice(0, 120)}…` : v.text);
  const when = (t) => t >= 0 ? new Date(t).toISOString().replace("T", " ").replace("Z", "") : "–";
  const draw = () => {
    if (!page) return;
    const newest = [...page.records].sort((a, b) => b.timestamp - a.timestamp || a.partition - b.partition || b.offset - a.offset);
    const scanned = page.partitions.reduce((n, c) => n + c.scanned, 0);
    const summary = page.partitions.length === 1
      ? `partition ${page.partitions[0].partition}: log start ${fmt.num(page.partitions[0].log_start_offset)}, high watermark ${fmt.num(page.partitions[0].high_watermark)}`
      : `${page.partitions.length} partitions, ${fmt.num(page.partitions.reduce((n, c) => n + c.high_watermark - c.log_start_offset, 0))} records`;
    const attrs = (r) => ({ "data-offset": r.offset, "data-partition": r.partition, class: compact.checked ? "compact" : "" });
    const rows = compact.checked
      ? newest.map((r) => h("tr", attrs(r), cell(when(r.timestamp), "mono"), num(r.partition), num(r.offset), cell(oneLine(r.key)), cell(oneLine(r.value)),
        cell(r.headers.map((x) => `${x.key}=${x.value ? x.value.text : "null"}`).join(", "), "mono")))
      : newest.map((r) => h("tr", attrs(r), cell(when(r.timestamp)), num(r.partition), num(r.offset), cell(shown(r.key)), cell(shown(r.value)),
        cell(r.headers.map((x) => h("div", {}, h("code", {}, x.key), ": ", x.value ? x.value.text : "null")))));
    replace(out, h("p", { class: "muted", id: "records-summary" }, `${summary} · ${page.records.length} shown, newest first`,
      filter.value ? ` · ${fmt.num(scanned)} read to find them` : ""),
    table("records", ["timestamp (UTC)", "#partition", "#offset", "key", "value", "headers"], rows));
  };
  compact.addEventListener("change", draw);
  const load = async () => {
    const q = new URLSearchParams({ limit: limit.value || 50 });
    if (partition.value !== "") q.set("partition", partition.value);
    if (mode.value === "offset" && from.value !== "") q.set("offset", from.value);
    if (mode.value === "timestamp" && time.value) q.set("timestamp", String(new Date(time.value).getTime()));
    if (filter.value) q.set("filter", filter.value);
    try {
      page = await get(`/topics/${enc(name)}/records?${q}`);
      draw();
    } catch (e) {
      replace(out, message("error", errorText(e)));
    }
  };
  filter.addEventListener("keydown", (e) => { if (e.key === "Enter") load(); });
  return h("div", { class: "panel" }, h("div", { class: "toolbar" }, h("label", {}, "partition ", partition), mode, from, time, filter,
    h("label", {}, "limit ", limit), h("label", {}, compact, " compact"), h("button", { id: "rb-load", onclick: load }, "show")), out,
  produceForm(name, load));
}

function produceForm(name, reload) {
  const key = h("input", { id: "produce-key", placeholder: "key (empty: none)" });
  const value = h("textarea", { id: "produce-value", rows: 3, placeholder: "value" });
  const headers = h("input", { id: "produce-headers", placeholder: "headers: name=value, name=value" });
  const partition = h("input", { id: "produce-partition", type: "number", min: 0, placeholder: "partition (empty: by key)" });
  const out = h("div", { id: "produce-out" });
  const send = async (event) => {
    event.preventDefault();
    const body = { value: value.value, headers: [] };
    if (key.value !== "") body.key = key.value;
    if (partition.value !== "") body.partition = Number(partition.value);
    for (const item of headers.value.split(",").map((x) => x.trim()).filter(Boolean)) {
      const at = item.indexOf("=");
      body.headers.push(at < 0 ? { key: item, value: null } : { key: item.slice(0, at).trim(), value: item.slice(at + 1).trim() });
    }
    const result = await act(out, "Producing", () => post(`/topics/${enc(name)}/records`, body));
    if (result) {
      replace(out, message("info", `Produced to partition ${result.partition} at offset ${result.offset}`));
      reload();
    }
  };
  return h("details", { class: "produce" }, h("summary", {}, "Produce a test record"),
    h("form", { class: "stack", id: "produce-form", onsubmit: send }, h("label", {}, "key", key), h("label", {}, "value", value),
      h("label", {}, "headers", headers), h("label", {}, "partition", partition),
      h("div", {}, h("button", { type: "submit", id: "produce-send" }, "produce")), out));
}

function topicActions(name, out) {
  const count = h("input", { id: "add-partitions-count", type: "number", min: 1, placeholder: "new total" });
  return h("div", { class: "toolbar" }, count,
    h("button", { onclick: () => act(out, "Adding partitions", () => post(`/topics/${enc(name)}/partitions`, { partitions: Number(count.value) })) }, "add partitions"),
    h("button", { class: "danger", id: "delete-topic", onclick: async () => {
      if (await confirmAction(`Delete topic ${name}?`, "Its records are deleted on every broker. This cannot be undone.")) {
        const done = await act(out, "Deleting", () => del(`/topics/${enc(name)}`));
        if (done) location.hash = "#/topics";
      }
    } }, "delete topic"));
}

// ------------------------------------------------------------------ partitions

async function partitionsPage(query) {
  const state = query.get("state") || "all";
  let offset = Number(query.get("offset") || 0);
  const size = 100;
  const internal = h("input", { id: "partitions-internal", type: "checkbox" });
  internal.checked = query.get("internal") === "true";
  const filter = h("input", { id: "partitions-topic", type: "search", placeholder: "topic contains…" });
  const list = h("div", { id: "partitions-list" });
  const pager = h("div", { class: "toolbar" });
  const titles = { all: "All partitions", under_replicated: "Under-replicated partitions", offline: "Offline partitions", under_min_isr: "Partitions under min ISR" };
  let refresh;
  const go = () => { offset = 0; refresh(); };
  internal.addEventListener("change", go);
  filter.addEventListener("input", go);
  main.append(h("h1", {}, titles[state] || "Partitions"),
    h("div", { class: "toolbar" }, filter, h("label", {}, internal, " show internal topics")), list, pager);
  let asked = 0;
  refresh = async () => {
    const mine = ++asked;
    const q = new URLSearchParams({ state, offset, limit: size, internal: internal.checked });
    if (filter.value) q.set("topic", filter.value);
    const { data, total } = await getPage(`/partitions?${q}`);
    if (mine !== asked) return;
    replace(list, table("partition-health", ["topic", "#partition", "leader", "replicas", "ISR", "health"], data.map((p) => h("tr", { "data-partition": `${p.topic}-${p.partition}` },
      cell(h("a", { href: `#/topic/${enc(p.topic)}` }, p.topic), p.topic.startsWith("__") ? "muted" : ""), num(p.partition), cell(String(p.leader)),
      cell(p.replicas.join(", ")), cell(p.isr.join(", ")), cell(brokerHealth(p))))));
    const last = Math.min(offset + size, total);
    replace(pager,
      h("span", { id: "partitions-count" }, total ? `${fmt.num(offset + 1)}–${fmt.num(last)} of ${fmt.num(total)}` : "no partitions"),
      h("button", { class: "secondary", id: "partitions-previous", disabled: offset === 0, onclick: () => { offset = Math.max(0, offset - size); refresh(); } }, "← previous"),
      h("button", { class: "secondary", id: "partitions-next", disabled: last >= total, onclick: () => { offset += size; refresh(); } }, "next →"));
  };
  return refresh;
}

// ------------------------------------------------------------------ groups

/** A table whose columns sort on a click of their header (again: the other way). `columns`:
 * [{ label, key: (row) => sortable value, cell: (row) => td, num }]. */
function sortableTable(id, columns, rows, state, rowAttrs) {
  const sorted = [...rows];
  const col = columns[state.by] || columns[0];
  sorted.sort((a, b) => {
    const x = col.key(a);
    const y = col.key(b);
    const order = x === y ? 0 : x === null || x === undefined ? 1 : y === null || y === undefined ? -1 : x < y ? -1 : 1;
    return state.desc ? -order : order;
  });
  const body = h("tbody", {}, ...sorted.map((r) => h("tr", rowAttrs(r), ...columns.map((c) => c.cell(r)))));
  const head = h("tr", {}, ...columns.map((c, i) => h("th", {
    class: `${c.num ? "num " : ""}sortable`, "data-sort": c.label, "aria-sort": i === state.by ? (state.desc ? "descending" : "ascending") : "none",
    onclick: () => { state.desc = i === state.by ? !state.desc : !!c.num; state.by = i; state.redraw(); },
  }, c.label, i === state.by ? (state.desc ? " ▼" : " ▲") : "")));
  return h("table", { class: "grid", id }, h("thead", {}, head), body);
}

async function groupsPage() {
  const list = h("div", { id: "group-list" });
  const search = h("input", { id: "group-search", type: "search", placeholder: "filter by group or topic" });
  const kind = h("select", { id: "group-type-filter", title: "group type" },
    ...[["", "every type"], ["classic", "classic"], ["consumer", "consumer"], ["share", "share"]].map(([v, l]) => h("option", { value: v }, l)));
  main.append(h("h1", {}, "Groups"),
    h("p", { class: "muted" }, "Every group of the cluster, whichever broker coordinates it: classic (JoinGroup), consumer (the KIP-848 protocol) and share groups. Sorted by total lag: who is behind comes first. A share group has no committed offsets and so no lag."),
    h("div", { class: "toolbar" }, search, kind), list);
  let groups = [];
  const state = { by: 5, desc: true, redraw: () => draw() };
  const lagCell = (g) => h("td", { class: `num${g.total_lag ? " warn" : ""}` }, fmt.num(g.total_lag));
  const columns = [
    { label: "group", key: (g) => g.group_id, cell: (g) => cell(h("a", { href: `#/group/${enc(g.group_id)}` }, g.group_id)) },
    { label: "type", key: (g) => g.group_type, cell: (g) => h("td", { class: "group-type" }, g.group_type) },
    { label: "state", key: (g) => g.state, cell: (g) => cell(h("span", { class: `pill ${g.state === "Stable" ? "ok" : g.state === "Empty" ? "" : "warn"}` }, g.state)) },
    { label: "members", num: true, key: (g) => g.members, cell: (g) => num(g.members) },
    { label: "topics", key: (g) => (g.topics || []).join(","), cell: (g) => cell((g.topics || []).join(", ") || "–") },
    { label: "total lag", num: true, key: (g) => g.total_lag, cell: lagCell },
    { label: "coordinator", num: true, key: (g) => g.coordinator, cell: (g) => num(g.coordinator) },
  ];
  const draw = () => {
    const needle = search.value.toLowerCase();
    const shown = groups.filter((g) => (!kind.value || g.group_type === kind.value)
      && (!needle || g.group_id.toLowerCase().includes(needle) || (g.topics || []).some((t) => t.toLowerCase().includes(needle))));
    replace(list, groups.length ? sortableTable("groups", columns, shown, state, (g) => ({ "data-group": g.group_id, "data-type": g.group_type }))
      : h("p", { class: "muted" }, "No groups."));
  };
  search.addEventListener("input", draw);
  kind.addEventListener("change", draw);
  return async () => { groups = await get("/groups"); draw(); };
}

const lagTrend = trendStore("kafkalite.lag"); // "group/topic/partition" -> recent lags, kept across page loads

/** Recent values per key in sessionStorage (kept across page loads of this tab). */
function trendStore(name) {
  let saved = {};
  try { saved = JSON.parse(sessionStorage.getItem(name) || "{}"); } catch { saved = {}; }
  return {
    push(key, value) {
      const trend = [...(saved[key] || []), value].slice(-60);
      saved[key] = trend;
      try { sessionStorage.setItem(name, JSON.stringify(saved)); } catch { /* full: keep in memory */ }
      return trend;
    },
  };
}

const assigned = (list) => (list || []).map((a) => `${a.topic} [${a.partitions.join(", ")}]`).join("; ") || "–";

async function groupPage(id) {
  const head = h("div");
  const members = h("div");
  const offsets = h("div", { id: "group-offsets" });
  const offsetsTitle = h("h2", {}, "Lag");
  const offsetsNote = h("p", { class: "muted" }, "Every partition the group committed or has assigned. One never committed shows \"no offset\": its lag counts from the log start.");
  const reset = h("div", {}, h("h2", {}, "Reset offsets"), resetForm(id));
  main.append(h("h1", {}, "Group ", h("code", {}, id)), head, h("h2", {}, "Members"), members,
    offsetsTitle, offsetsNote, offsets, reset);
  return async () => {
    const g = await get(`/groups/${enc(id)}`);
    const epochs = g.group_type === "classic" ? ""
      : ` · group epoch ${g.group_epoch} · assignment epoch ${g.assignment_epoch} · assignor ${g.assignor || "–"}`;
    replace(head, h("p", {}, h("span", { class: "pill", id: "group-state" }, g.state), " ",
      h("span", { class: "pill", id: "group-type" }, g.group_type),
      ` ${g.group_type === "classic" ? `${g.protocol_type || ""} ${g.protocol || ""}` : ""}${epochs} · coordinator ${g.coordinator}`,
      ...(g.group_type === "share" ? [] : [" · total lag ", h("b", { id: "total-lag" }, fmt.num(g.total_lag))])));
    const clientOf = Object.fromEntries(g.members.map((m) => [m.member_id, m.client_id]));
    const classic = g.group_type === "classic";
    const heads = classic ? ["member", "client", "host", "assignment"]
      : ["member", "#epoch", "client", "host", "subscribed", "assignment", ...(g.group_type === "consumer" ? ["target assignment"] : [])];
    replace(members, g.members.length ? table("members", heads, g.members.map((m) => h("tr", { "data-member": m.member_id },
      cell(h("code", {}, m.member_id)), ...(classic ? [] : [num(m.member_epoch)]), cell(m.client_id), cell(m.client_host),
      ...(classic ? [] : [cell([...(m.subscribed_topics || []), ...(m.subscribed_topic_regex ? [`/${m.subscribed_topic_regex}/`] : [])].join(", ") || "–")]),
      cell(assigned(m.assignment)),
      ...(g.group_type === "consumer" ? [cell(assigned(m.target_assignment))] : []))))
      : h("p", { class: "muted" }, "No members (the group is inactive: its offsets can be reset)."));
    if (g.group_type === "share") {
      reset.hidden = true;
      replace(offsetsTitle, "Share-partitions");
      replace(offsetsNote, "Where the group stands in each partition: its start offset (records before it are done), the end of the window it tracks, and the in-flight records in it by state. \"live\" is the partition leader's own state (this broker leads it): who holds each acquired range and until when. \"persisted\" is the share coordinator's copy (another broker leads the partition, or it was not read since): acquired records show there as available.");
      const rows = [];
      for (const o of g.share_offsets || []) {
        const ranges = o.in_flight || [];
        const span = Math.max(ranges.length, 1);
        const head = [cell(o.topic), num(o.partition),
          h("td", { class: "num start" }, o.start_offset === null ? h("span", { class: "muted" }, "not read") : fmt.num(o.start_offset)),
          h("td", { class: "num end" }, o.end_offset === null || o.end_offset === undefined ? "–" : fmt.num(o.end_offset)),
          cell(o.view ? `${o.view}${o.leader === null || o.leader === undefined ? "" : ` (leader ${o.leader})`}` : (o.error || "–"), o.error ? "warn view" : "view")];
        head.forEach((td) => td.setAttribute("rowspan", span));
        const rangeCells = (r) => [
          h("td", { class: "num range" }, r.first_offset === r.last_offset ? fmt.num(r.first_offset) : `${fmt.num(r.first_offset)}–${fmt.num(r.last_offset)}`),
          h("td", { class: `state ${r.state === "ACQUIRED" ? "" : "muted"}` }, r.state),
          h("td", { class: "num delivery" }, fmt.num(r.delivery_count)),
          cell(r.member_id ? h("span", { title: r.member_id }, clientOf[r.member_id] ? `${clientOf[r.member_id]} ${r.member_id}` : r.member_id) : "–", r.member_id ? "member" : "muted member"),
          h("td", { class: "lock" }, r.lock_expires_ms === null ? "–" : `${new Date(r.lock_expires_ms).toLocaleTimeString()} (in ${Math.max(0, Math.round((r.lock_expires_ms - Date.now()) / 1000))} s)`)];
        if (!ranges.length) {
          rows.push(h("tr", { "data-partition": `${o.topic}-${o.partition}` }, ...head,
            h("td", { class: "muted", colspan: 5 }, o.in_flight ? "no records in flight" : "–")));
          continue;
        }
        ranges.forEach((r, i) => rows.push(h("tr", {
          "data-partition": `${o.topic}-${o.partition}`, "data-range": `${o.topic}-${o.partition}:${r.first_offset}-${r.last_offset}`, "data-state": r.state,
          ...(i ? { class: "range-cont" } : {}) }, ...(i ? [] : head), ...rangeCells(r))));
      }
      replace(offsets, rows.length ? table("share-offsets", ["topic", "#partition", "#start offset", "#end offset", "view", "#in flight", "state", "#deliveries", "member", "lock expires"], rows)
        : h("p", { class: "muted" }, "The group has read no partition yet."));
      return;
    }
    replace(offsets, table("lag-table", ["topic", "#partition", "#committed", "#log start", "#end", "#lag", "member", "trend"], g.offsets.map((o) => {
      const trend = lagTrend.push(`${id}/${o.topic}/${o.partition}`, o.lag || 0);
      return h("tr", { "data-partition": `${o.topic}-${o.partition}` }, cell(o.topic), num(o.partition),
        h("td", { class: "num committed" }, o.committed_offset === null ? h("span", { class: "muted" }, "no offset") : fmt.num(o.committed_offset)),
        num(o.log_start_offset), num(o.high_watermark), h("td", { class: `num lag${o.lag ? " warn" : ""}` }, fmt.num(o.lag)),
        cell(o.member_id ? clientOf[o.member_id] || o.member_id : "–", o.member_id ? "" : "muted"), cell(sparkline(trend)));
    })));
  };
}

function resetForm(id) {
  const to = h("select", { id: "reset-to", name: "to" }, ...["earliest", "latest", "timestamp", "explicit"].map((x) => h("option", { value: x }, x)));
  const topics = h("input", { id: "reset-topics", placeholder: "topics, comma-separated (default: those it committed)" });
  const value = h("input", { id: "reset-value", placeholder: "timestamp (ms) or offset" });
  const partition = h("input", { id: "reset-partition", type: "number", min: 0, placeholder: "partition (explicit)" });
  const preview = h("div", { id: "reset-preview" });
  const out = h("div", { id: "reset-out" });
  const body = (dryRun) => {
    const b = { to: to.value, dry_run: dryRun };
    const names = topics.value.split(",").map((x) => x.trim()).filter(Boolean);
    if (to.value === "explicit") {
      b.offsets = names.map((topic) => ({ topic, partition: Number(partition.value || 0), offset: Number(value.value) }));
    } else {
      if (names.length) b.topics = names;
      if (to.value === "timestamp") b.timestamp = Number(value.value);
    }
    return b;
  };
  const doPreview = async () => {
    const result = await act(out, "Preview", () => post(`/groups/${enc(id)}/offsets`, body(true)));
    if (result) {
      replace(preview, table("reset-preview-table", ["topic", "#partition", "#new offset"], result.offsets.map((o) => h("tr", {}, cell(o.topic), num(o.partition), num(o.offset)))));
      apply.disabled = false;
    }
  };
  const apply = h("button", { class: "danger", id: "reset-apply", disabled: true, onclick: async () => {
    if (await confirmAction(`Reset offsets of ${id}?`, "The group's committed offsets are replaced by the previewed ones. Its consumers start there.")) {
      await act(out, "Resetting offsets", () => post(`/groups/${enc(id)}/offsets`, body(false)));
    }
  } }, "apply");
  return h("div", { class: "panel" }, h("div", { class: "toolbar" }, to, topics, value, partition,
    h("button", { class: "secondary", id: "reset-preview-button", onclick: doPreview }, "preview"), apply),
  h("p", { class: "muted" }, "Only an inactive group (no members) can be reset. Preview shows the new positions without committing them."), preview, out);
}

// ------------------------------------------------------------------ brokers

async function brokersPage() {
  const list = h("div");
  const defaults = h("div", { id: "broker-defaults" });
  main.append(h("h1", {}, "Brokers"), list, h("h2", {}, "Cluster-wide broker defaults"),
    h("p", { class: "muted" }, "Dynamic defaults every broker takes unless it has a value of its own (DYNAMIC_DEFAULT_BROKER_CONFIG)."), defaults);
  let shown = false;
  return async () => {
    const cluster = await get("/cluster");
    if (shown) return;
    shown = true;
    const sections = [brokerTable(cluster)];
    for (const b of cluster.brokers) {
      const { data: hosted, total } = await getPage(`/partitions?broker=${b.id}&limit=10000`);
      const leads = hosted.filter((p) => p.leader === b.id).length;
      const body = [h("p", {}, `${fmt.num(leads)} partitions led, ${fmt.num(total - leads)} followed`)];
      try {
        const storage = await get(`/brokers/${b.id}/storage`);
        body.push(table(`log-dirs-${b.id}`, ["log dir", "#partitions", "#size", "state"], storage.log_dirs.map((d) => h("tr", {},
          cell(h("code", {}, d.path)), num(d.partitions), h("td", { class: "num" }, fmt.bytes(d.size_bytes)),
          cell(d.offline ? h("span", { class: "pill bad" }, "offline") : h("span", { class: "pill ok" }, "online"))))));
      } catch (e) {
        body.push(message("error", `log dirs: ${errorText(e)}`));
      }
      body.push(brokerConfigs(`/brokers/${b.id}/configs`, String(b.id)));
      sections.push(h("div", { class: "panel", id: `broker-${b.id}` }, h("h2", {}, `Broker ${b.id}${b.is_controller ? " (controller)" : ""}`), ...body));
    }
    replace(list, ...sections);
    replace(defaults, brokerConfigs("/cluster/broker-configs", "default"));
  };
}

const SOURCE_CLASS = { DYNAMIC_BROKER_CONFIG: " warn", DYNAMIC_DEFAULT_BROKER_CONFIG: " ok" };

/** A broker's configs (or the cluster-wide defaults) with the source of each value, and a form
 * setting or removing a dynamic one (IncrementalAlterConfigs through the admin API). A secret's
 * value is never shown: the API answers it as null. */
function brokerConfigs(path, key) {
  const listing = h("div", { id: `broker-configs-${key}` });
  const out = h("div", { id: `broker-config-out-${key}` });
  const filter = h("input", { type: "search", placeholder: "filter configs", id: `broker-config-filter-${key}` });
  const names = h("datalist", { id: `broker-config-names-${key}` });
  const name = h("input", { id: `broker-config-name-${key}`, list: `broker-config-names-${key}`, placeholder: "config name, e.g. log.retention.ms", required: true });
  const value = h("input", { id: `broker-config-value-${key}`, placeholder: "value", autocomplete: "off" });
  let entries = [];
  let secret = new Set();
  const draw = () => {
    const needle = filter.value.toLowerCase();
    const rows = entries.filter((c) => !needle || c.name.toLowerCase().includes(needle));
    replace(listing, rows.length ? table(`broker-config-table-${key}`, ["name", "value", "source", "dynamic", ""], rows.map((c) => h("tr", { "data-config": c.name, "data-source": c.source },
      cell(h("code", {}, c.name)), cell(c.value === null ? h("span", { class: "muted" }, c.sensitive ? "(secret)" : "null") : c.value, "mono"),
      cell(h("span", { class: `pill${SOURCE_CLASS[c.source] || ""}` }, c.source)), cell(c.read_only ? "" : "yes", "muted"),
      cell((key === "default" ? c.source === "DYNAMIC_DEFAULT_BROKER_CONFIG" : c.source === "DYNAMIC_BROKER_CONFIG")
        ? h("button", { class: "secondary small", "data-remove": c.name, onclick: () => change(c.name, null) }, "remove") : ""))))
      : h("p", { class: "muted" }, key === "default" ? "No cluster-wide dynamic defaults." : "No configs."));
  };
  const load = async () => {
    try {
      entries = (await get(path)).configs;
      secret = new Set(entries.filter((c) => c.sensitive).map((c) => c.name));
      if (key !== "default") replace(names, ...entries.filter((c) => !c.read_only).map((c) => h("option", { value: c.name })));
      draw();
    } catch (e) {
      replace(listing, message("error", `configs: ${errorText(e)}`));
    }
  };
  const change = async (config, newValue) => {
    const what = newValue === null ? `Removing ${config}` : `Setting ${config}`;
    const done = await act(out, what, () => patch(path, { configs: { [config]: newValue } }));
    if (done) { value.value = ""; await load(); }
  };
  name.addEventListener("input", () => { value.type = secret.has(name.value.trim()) || /password|jaas/.test(name.value) ? "password" : "text"; });
  filter.addEventListener("input", draw);
  load();
  return h("div", { class: "broker-configs" },
    h("form", { class: "toolbar", id: `broker-config-form-${key}`, onsubmit: (event) => { event.preventDefault(); change(name.value.trim(), value.value); } },
      name, names, value, h("button", { type: "submit", id: `broker-config-set-${key}` }, "set"),
      h("button", { type: "button", class: "secondary", id: `broker-config-remove-${key}`, onclick: () => change(name.value.trim(), null) }, "remove")), out,
    h("details", { open: key === "default", id: `broker-config-details-${key}` }, h("summary", {}, key === "default" ? "defaults" : "configs, with where each value comes from"), filter, listing));
}

// ------------------------------------------------------------------ schemas

const LEVELS = ["NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"];

/** The Schema Registry of this broker: subjects with their latest version, type and level; the
 * global level, editable (ALTER on the cluster, as the registry's own API). */
async function schemasPage(query) {
  const deleted = h("input", { id: "schemas-deleted", type: "checkbox" });
  deleted.checked = query.get("deleted") === "true";
  const search = h("input", { id: "schemas-search", type: "search", placeholder: "filter subjects" });
  const head = h("div", { id: "schemas-head" });
  const list = h("div", { id: "subject-list" });
  const out = h("div", { id: "schemas-out" });
  const level = h("select", { id: "global-level" }, ...LEVELS.map((l) => h("option", { value: l }, l)));
  const levelForm = h("div", { class: "toolbar", hidden: true }, h("label", {}, "global compatibility ", level),
    h("button", { id: "global-level-save", onclick: () => act(out, "Setting the global compatibility", () => call("PUT", "/schemas/config", { compatibility: level.value })) }, "save"));
  main.append(h("h1", {}, "Schemas"), head, levelForm, out,
    h("div", { class: "toolbar" }, search, h("label", {}, deleted, " show soft-deleted")), list);
  let data = null;
  let levelShown = false;
  const draw = () => {
    if (!data) return;
    const needle = search.value.toLowerCase();
    const rows = data.subjects.filter((x) => !needle || x.subject.toLowerCase().includes(needle));
    replace(list, rows.length ? table("subjects", ["subject", "#latest version", "#id", "type", "#versions", "compatibility", ""], rows.map((x) => h("tr", { "data-subject": x.subject },
      cell(h("a", { href: `#/schema/${enc(x.subject)}${deleted.checked ? "?deleted=true" : ""}` }, x.subject)), num(x.latest_version), num(x.latest_id), cell(x.schema_type),
      num(x.versions), cell(h("span", { class: `pill${x.compatibility_is_subjects ? " warn" : ""}`, title: x.compatibility_is_subjects ? "the subject's own level" : "the global level" }, x.compatibility)),
      cell(x.deleted ? h("span", { class: "pill bad" }, "soft-deleted") : ""))))
      : h("p", { class: "muted" }, "No subjects."));
  };
  search.addEventListener("input", draw);
  let asked = 0;
  const refresh = async () => {
    const mine = ++asked;
    const answer = await get(`/schemas?deleted=${deleted.checked}`);
    if (mine !== asked) return;
    data = answer;
    if (!data.enabled) {
      replace(head, message("info", "The Schema Registry is disabled on this broker (schema.registry.listeners is empty)."));
      head.firstChild.id = "schemas-disabled";
      levelForm.hidden = true;
      replace(list);
      return;
    }
    replace(head, h("p", { class: "muted" }, `This broker's Schema Registry (${data.url || "no listener"}) · mode ${data.mode} · global compatibility `,
      h("b", { id: "global-compatibility" }, data.compatibility)));
    levelForm.hidden = false;
    if (!levelShown) { level.value = data.compatibility; levelShown = true; }
    draw();
  };
  deleted.addEventListener("change", refresh);
  return refresh;
}

/** One subject: its versions, a version's schema, a diff of two versions, its level. */
async function subjectPage(subject, query) {
  const deleted = h("input", { id: "subject-deleted", type: "checkbox" });
  deleted.checked = query.get("deleted") === "true";
  const head = h("div", { id: "subject-head" });
  const versions = h("div", { id: "subject-versions" });
  const schema = h("div", { id: "schema-view" });
  const diff = h("div", { id: "schema-diff" });
  const out = h("div", { id: "subject-out" });
  const from = h("select", { id: "diff-from" });
  const to = h("select", { id: "diff-to" });
  const level = h("select", { id: "subject-level" }, h("option", { value: "" }, "(the global level)"), ...LEVELS.map((l) => h("option", { value: l }, l)));
  const base = `/schemas/subjects/${enc(subject)}`;
  const showVersion = async (v) => {
    try {
      const s = await get(`${base}/versions/${v}`);
      replace(schema, h("h2", {}, `Version ${s.version}`, s.deleted ? " (soft-deleted)" : ""),
        h("p", { class: "muted" }, `schema id ${s.id} · ${s.schema_type}`, s.references.length ? ` · references ${s.references.map((r) => `${r.name} (${r.subject} v${r.version})`).join(", ")}` : ""),
        h("pre", { class: "schema-text", id: "schema-text", "data-version": s.version }, s.schema_text));
    } catch (e) { replace(schema, message("error", errorText(e))); }
  };
  const showDiff = async () => {
    try {
      const d = await get(`${base}/diff?from=${from.value}&to=${to.value}`);
      const sign = { same: " ", added: "+", removed: "-" };
      replace(diff, h("pre", { class: "diff", id: "diff-lines", "data-from": d.from_version, "data-to": d.to_version },
        ...d.lines.map((l) => h("div", { class: `diff-${l.op}` }, `${sign[l.op]} ${l.text}`))));
    } catch (e) { replace(diff, message("error", errorText(e))); }
  };
  const saveLevel = () => act(out, "Setting the compatibility", () => call("PUT", `${base}/config`, { compatibility: level.value || null }));
  main.append(h("h1", {}, "Subject ", h("code", {}, subject)), head,
    h("div", { class: "toolbar" }, h("label", {}, "compatibility ", level), h("button", { id: "subject-level-save", onclick: saveLevel }, "save"),
      h("label", {}, deleted, " show soft-deleted versions")), out,
    h("h2", {}, "Versions"), versions, schema,
    h("h2", {}, "Diff"), h("div", { class: "toolbar" }, h("label", {}, "from ", from), h("label", {}, "to ", to), h("button", { id: "diff-show", onclick: showDiff }, "diff")), diff);
  let levelShown = false;
  let drawnFor = null;
  const refresh = async () => {
    const s = await get(`${base}?deleted=${deleted.checked}`);
    replace(head, h("p", { class: "muted" }, "compatibility ", h("b", { id: "subject-compatibility" }, s.compatibility),
      s.subject_compatibility ? " (the subject's own)" : ` (the global level, ${s.global_compatibility})`, ` · mode ${s.mode}`));
    if (!levelShown) { level.value = s.subject_compatibility || ""; levelShown = true; }
    const key = JSON.stringify(s.versions);
    if (key === drawnFor) return; // keep the chosen versions while nothing changed
    drawnFor = key;
    replace(versions, table("version-table", ["#version", "#id", "state", ""], s.versions.map((v) => h("tr", { "data-version": v.version },
      num(v.version), num(v.id), cell(v.deleted ? h("span", { class: "pill bad" }, "soft-deleted") : h("span", { class: "pill ok" }, "live")),
      cell(h("button", { class: "secondary small", "data-show": v.version, onclick: () => showVersion(v.version) }, "show"))))));
    const options = () => s.versions.map((v) => h("option", { value: v.version }, `v${v.version}${v.deleted ? " (deleted)" : ""}`));
    replace(from, ...options());
    replace(to, ...options());
    if (s.versions.length) {
      from.value = String(s.versions[Math.max(0, s.versions.length - 2)].version);
      to.value = String(s.versions[s.versions.length - 1].version);
      await showVersion(s.versions[s.versions.length - 1].version);
    }
  };
  deleted.addEventListener("change", () => { drawnFor = null; refresh(); });
  return refresh;
}

// ------------------------------------------------------------------ metrics

/** The broker's Prometheus text, fetched with the console's credentials (a link to /metrics
 * would get the browser's own login dialog when the API asks for credentials). */
async function metricsPage() {
  const filter = h("input", { id: "metrics-filter", type: "search", placeholder: "series name contains…" });
  const text = h("pre", { class: "metrics", id: "metrics-text" });
  main.append(h("h1", {}, "Metrics"), h("p", { class: "muted" }, "This broker's /metrics (Prometheus text format), as a scraper reads it."),
    h("div", { class: "toolbar" }, filter), text);
  let raw = "";
  const draw = () => {
    const needle = filter.value.toLowerCase();
    text.textContent = needle ? raw.split("\n").filter((l) => l.toLowerCase().includes(needle)).join("\n") : raw;
  };
  filter.addEventListener("input", draw);
  return async () => { raw = String((await call("GET", "/metrics")).data ?? ""); draw(); };
}

// ------------------------------------------------------------------ actions

function actionsPage() {
  const form = (id, title, fields, button, run, danger) => {
    const out = h("div");
    const inputs = Object.fromEntries(fields.map(([name, attrs]) => [name, h("input", { name, ...attrs })]));
    const submit = async (event) => {
      event.preventDefault();
      const values = Object.fromEntries(Object.entries(inputs).map(([k, v]) => [k, v.value.trim()]));
      if (danger && !(await confirmAction(title, danger(values)))) return;
      await act(out, title, () => run(values));
    };
    return h("form", { class: "panel stack", id, onsubmit: submit }, h("h2", {}, title),
      ...fields.map(([name, attrs]) => h("label", {}, attrs.label || name, inputs[name])),
      h("div", {}, h("button", { type: "submit", class: danger ? "danger" : "" }, button)), out);
  };
  const ints = (text) => text.split(",").map((x) => Number(x.trim())).filter((x) => !Number.isNaN(x));
  main.append(h("h1", {}, "Actions"), h("p", { class: "muted" }, "Everything here goes through the admin API. Destructive actions ask first."),
    form("create-topic", "Create topic", [["name", { required: true, label: "name" }], ["partitions", { type: "number", min: 1, label: "partitions (empty: broker default)" }],
      ["replication_factor", { type: "number", min: 1, label: "replication factor (empty: broker default)" }], ["configs", { label: "configs (name=value, comma-separated)" }]],
    "create", (v) => {
      const body = { name: v.name };
      if (v.partitions) body.partitions = Number(v.partitions);
      if (v.replication_factor) body.replication_factor = Number(v.replication_factor);
      if (v.configs) body.configs = Object.fromEntries(v.configs.split(",").map((x) => x.split("=").map((s) => s.trim())));
      return post("/topics", body);
    }),
    form("add-partitions", "Add partitions", [["topic", { required: true }], ["partitions", { type: "number", min: 1, required: true, label: "new total" }]],
      "add", (v) => post(`/topics/${enc(v.topic)}/partitions`, { partitions: Number(v.partitions) })),
    form("alter-config", "Alter topic config", [["topic", { required: true }], ["name", { required: true, label: "config name" }], ["value", { label: "value (empty: remove the override)" }]],
      "apply", (v) => patch(`/topics/${enc(v.topic)}/config`, { configs: { [v.name]: v.value === "" ? null : v.value } })),
    form("delete-topic", "Delete topic", [["topic", { required: true }]], "delete",
      (v) => del(`/topics/${enc(v.topic)}`), (v) => `Delete topic ${v.topic} and all its records? This cannot be undone.`),
    h("div", { class: "panel" }, h("h2", {}, "Reset group offsets"), h("p", {}, "Open the group on the ", h("a", { href: "#/groups" }, "Groups"), " page: it previews the new positions before applying them.")),
    form("elect-leaders", "Elect preferred leaders", [["topic", { label: "topic (empty: every partition)" }], ["partitions", { label: "partitions (comma-separated; empty: all of the topic)" }]],
      "elect", async (v) => {
        let body = { election_type: "preferred" };
        if (v.topic) {
          let ps = ints(v.partitions);
          if (!ps.length) ps = (await get(`/topics/${enc(v.topic)}`)).partitions.map((p) => p.partition);
          body = { ...body, partitions: ps.map((partition) => ({ topic: v.topic, partition })) };
        }
        return post("/partitions/elect-leaders", body);
      }, (v) => `Move leadership of ${v.topic || "every partition"} back to the preferred replicas?`),
    form("reassign", "Reassign a partition", [["topic", { required: true }], ["partition", { type: "number", min: 0, required: true }], ["replicas", { required: true, label: "replicas (broker ids, comma-separated; the first is preferred leader)" }]],
      "reassign", (v) => post("/partitions/reassign", { partitions: [{ topic: v.topic, partition: Number(v.partition), replicas: ints(v.replicas) }] }),
      (v) => `Move ${v.topic}-${v.partition} to brokers ${v.replicas}? Data is copied to new replicas, then removed from old ones.`));
  return null;
}

// ------------------------------------------------------------------ security

/** ACLs, SCRAM users and quotas: lists with a delete button per row, and a form to add. Each
 * goes through the admin API, which needs what Kafka's own request needs (a 403 is shown). */
function securityPage() {
  const acls = h("div", { id: "acl-list" });
  const users = h("div", { id: "user-list" });
  const quotas = h("div", { id: "quota-list" });
  const aclOut = h("div", { id: "acl-out" });
  const userOut = h("div", { id: "user-out" });
  const quotaOut = h("div", { id: "quota-out" });
  const select = (id, values) => h("select", { id, name: id }, ...values.map((v) => h("option", { value: v }, v)));
  const field = (id, attrs = {}) => h("input", { id, name: id, ...attrs });
  const aclForm = {
    resource_type: select("acl-resource-type", ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"]),
    resource_name: field("acl-resource-name", { placeholder: "name (kafka-cluster for the cluster)", required: true }),
    pattern_type: select("acl-pattern-type", ["LITERAL", "PREFIXED"]),
    principal: field("acl-principal", { placeholder: "User:alice", required: true }),
    host: field("acl-host", { value: "*" }),
    operation: select("acl-operation", ["READ", "WRITE", "DESCRIBE", "CREATE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CLUSTER_ACTION", "ALL"]),
    permission: select("acl-permission", ["ALLOW", "DENY"]),
  };
  const userForm = {
    name: field("user-name", { placeholder: "user name", required: true }),
    password: field("user-password", { type: "password", placeholder: "password", required: true, autocomplete: "new-password" }),
    mechanism: select("user-mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"]),
  };
  const quotaForm = {
    user: field("quota-user", { placeholder: "user (<default> for all users)" }),
    client_id: field("quota-client-id", { placeholder: "client id (<default> for all)" }),
    producer_byte_rate: field("quota-producer", { type: "number", min: 0, placeholder: "producer bytes/s" }),
    consumer_byte_rate: field("quota-consumer", { type: "number", min: 0, placeholder: "consumer bytes/s" }),
    request_percentage: field("quota-request", { type: "number", min: 0, placeholder: "request %" }),
  };
  const values = (form) => Object.fromEntries(Object.entries(form).map(([k, v]) => [k, v.value.trim()]));
  const submit = (out, what, run) => async (event) => {
    event.preventDefault();
    await act(out, what, run);
  };
  const deleteButton = (id, what, run) => h("button", { class: "danger small", "data-delete": id, onclick: async () => {
    if (await confirmAction(`Delete ${what}?`, "This cannot be undone.")) await act(aclOut, `Deleting ${what}`, run);
  } }, "delete");
  main.append(h("h1", {}, "Security"),
    h("p", { class: "muted" }, "ACLs, SCRAM users and client quotas of the cluster. Changing them needs ALTER (quotas: ALTER_CONFIGS) on the cluster, as Kafka's own requests."),
    h("h2", {}, "ACLs"), acls,
    h("form", { class: "panel", id: "acl-form", onsubmit: submit(aclOut, "Creating ACL", () => post("/acls", values(aclForm))) },
      h("div", { class: "toolbar" }, ...Object.values(aclForm), h("button", { type: "submit", id: "acl-create" }, "add ACL")), aclOut),
    h("h2", {}, "Users (SCRAM)"), users,
    h("form", { class: "panel", id: "user-form", onsubmit: submit(userOut, "Setting user", async () => {
      const result = await post("/users", values(userForm));
      userForm.password.value = "";
      return result;
    }) }, h("div", { class: "toolbar" }, ...Object.values(userForm), h("button", { type: "submit", id: "user-create" }, "set user")), userOut),
    h("h2", {}, "Client quotas"), quotas,
    h("form", { class: "panel", id: "quota-form", onsubmit: submit(quotaOut, "Setting quotas", () => {
      const v = values(quotaForm);
      const body = { values: {} };
      if (v.user) body.user = v.user;
      if (v.client_id) body.client_id = v.client_id;
      for (const key of ["producer_byte_rate", "consumer_byte_rate", "request_percentage"]) if (v[key] !== "") body.values[key] = Number(v[key]);
      return post("/quotas", body);
    }) }, h("div", { class: "toolbar" }, ...Object.values(quotaForm), h("button", { type: "submit", id: "quota-set" }, "set quotas")), quotaOut));
  const failed = (e) => message("error", errorText(e));
  return async () => {
    const [a, u, q] = await Promise.allSettled([get("/acls"), get("/users"), get("/quotas")]);
    replace(acls, a.status === "rejected" ? failed(a.reason) : a.value.length ? table("acls", ["resource", "pattern", "principal", "host", "operation", "permission", ""], a.value.map((x) => {
      const query = new URLSearchParams(x);
      const id = `${x.resource_type}:${x.resource_name}:${x.principal}:${x.operation}:${x.permission}`;
      return h("tr", { "data-acl": id }, cell(`${x.resource_type}:${x.resource_name}`), cell(x.pattern_type), cell(x.principal), cell(x.host),
        cell(x.operation), cell(h("span", { class: `pill ${x.permission === "ALLOW" ? "ok" : "bad"}` }, x.permission)),
        cell(deleteButton(id, `the ACL ${x.principal} ${x.operation} on ${x.resource_type}:${x.resource_name}`, () => del(`/acls?${query}`))));
    })) : h("p", { class: "muted" }, "No ACLs."));
    replace(users, u.status === "rejected" ? failed(u.reason) : u.value.length ? table("users", ["user", "credentials", ""], u.value.map((x) => h("tr", { "data-user": x.name },
      cell(x.name), cell(x.credentials.map((c) => `${c.mechanism} (${c.iterations} iterations)`).join(", ")),
      cell(deleteButton(x.name, `user ${x.name}`, () => del(`/users/${enc(x.name)}`)))))) : h("p", { class: "muted" }, "No SCRAM users."));
    replace(quotas, q.status === "rejected" ? failed(q.reason) : q.value.length ? table("quotas", ["user", "client id", "quotas", ""], q.value.map((x) => {
      const query = new URLSearchParams();
      if (x.user !== null) query.set("user", x.user);
      if (x.client_id !== null) query.set("client_id", x.client_id);
      const id = `${x.user ?? ""}/${x.client_id ?? ""}`;
      return h("tr", { "data-quota": id }, cell(x.user ?? "–"), cell(x.client_id ?? "–"),
        cell(Object.entries(x.values).map(([k, v]) => `${k}=${v}`).join(", ")),
        cell(deleteButton(id, `the quotas of ${id}`, () => del(`/quotas?${query}`))));
    })) : h("p", { class: "muted" }, "No quotas."));
  };
}

// ------------------------------------------------------------------ login

/** The login page, shown when the admin API asks for credentials: HTTP basic (a SCRAM or
 * PLAIN user) or a bearer token. They are checked with one request and kept for this tab. */
function loginPage(query) {
  const next = query.get("next") || "/";
  const user = h("input", { id: "login-user", name: "username", autocomplete: "username", placeholder: "user" });
  const password = h("input", { id: "login-password", name: "password", type: "password", autocomplete: "current-password", placeholder: "password" });
  const token = h("input", { id: "login-token", name: "token", type: "password", autocomplete: "off", placeholder: "bearer token" });
  const kind = h("select", { id: "login-kind" }, h("option", { value: "basic" }, "user and password"), h("option", { value: "bearer" }, "bearer token"));
  const out = h("div", { id: "login-out" });
  const basicFields = h("div", { class: "stack" }, h("label", {}, "user", user), h("label", {}, "password", password));
  const bearerFields = h("div", { class: "stack", hidden: true }, h("label", {}, "token", token));
  kind.addEventListener("change", () => { basicFields.hidden = kind.value !== "basic"; bearerFields.hidden = kind.value !== "bearer"; });
  const submit = async (event) => {
    event.preventDefault();
    const bytes = new TextEncoder().encode(`${user.value}:${password.value}`);
    const value = kind.value === "basic" ? `Basic ${btoa(String.fromCharCode(...bytes))}` : `Bearer ${token.value.trim()}`;
    try {
      await call("GET", "/cluster", undefined, { authorization: value });
    } catch (e) {
      if (e.status === 401 || e.status === 429) {
        replace(out, message("error", e.status === 429 ? "Too many failed logins from this address; wait and retry." : "Wrong credentials."));
        return;
      }
      if (e.status !== 403) { replace(out, message("error", errorText(e))); return; } // 403: known, just not allowed to describe the cluster
    }
    password.value = "";
    token.value = "";
    setAuthorization(value);
    location.hash = `#${next}`;
  };
  main.append(h("form", { class: "panel stack login", id: "login-form", onsubmit: submit },
    h("h1", {}, "Log in"),
    h("p", { class: "muted" }, "This broker's admin API asks for credentials: a SCRAM or PLAIN user, or its bearer token. They are kept in this browser tab only."),
    h("label", {}, "with", kind), basicFields, bearerFields,
    h("div", {}, h("button", { type: "submit", id: "login-submit" }, "log in")), out));
  user.focus();
  return null;
}

function showAuthState() {
  const link = document.getElementById("logout");
  link.hidden = !authorization();
}

whenUnauthorized(() => {
  setAuthorization(null);
  const { parts } = parseHash();
  if (parts[0] !== "login") {
    const here = location.hash.replace(/^#/, "") || "/";
    location.hash = `#/login?next=${encodeURIComponent(here)}`;
  }
});
document.getElementById("logout").addEventListener("click", (event) => {
  event.preventDefault();
  setAuthorization(null);
  location.hash = "#/login";
});

// ------------------------------------------------------------------ router

let probed = false;

async function show() {
  const mine = ++generation;
  // a page that asks the API nothing still finds out it needs a login: once a load, and on
  // every page while there are no credentials (after a logout)
  if (!probed || (!authorization() && parseHash().parts[0] !== "login")) {
    probed = true;
    try { await get("/cluster"); } catch { /* a 401 has moved to the login page */ }
    if (mine !== generation) return;
  }
  clearInterval(timer);
  main.replaceChildren();
  const { parts, query } = parseHash();
  const page = parts[0] || "overview";
  for (const a of document.querySelectorAll("#nav a")) {
    const target = { topic: "topics", group: "groups", partitions: "overview", schema: "schemas" }[page] || page;
    a.classList.toggle("active", a.dataset.page === target);
  }
  const pages = {
    overview: () => overviewPage(), topics: () => topicsPage(query), topic: () => topicPage(parts[1]),
    groups: () => groupsPage(), group: () => groupPage(parts[1]), brokers: () => brokersPage(),
    schemas: () => schemasPage(query), schema: () => subjectPage(parts[1], query), metrics: () => metricsPage(),
    partitions: () => partitionsPage(query), actions: () => actionsPage(), security: () => securityPage(),
    login: () => loginPage(query),
  };
  refreshNow = () => {};
  showAuthState();
  const refresh = await (pages[page] || pages.overview)();
  if (!refresh) { main.dataset.loaded = page; return; }
  const tick = async () => {
    if (mine !== generation) return;
    try {
      await refresh();
      status.classList.remove("bad");
      main.dataset.loaded = page;
      main.dataset.refreshed = String(Date.now());
    } catch (e) {
      status.textContent = `refresh failed: ${errorText(e)}`;
      status.classList.add("bad");
    }
  };
  refreshNow = tick;
  await tick();
  timer = setInterval(tick, REFRESH_MS);
}

window.addEventListener("hashchange", show);
show();
