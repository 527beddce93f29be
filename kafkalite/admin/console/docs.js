// Renders the admin API's OpenAPI 3.1 document (/openapi.json): operations by tag, their
// parameters, bodies and answers (schemas expanded from #/components/schemas), and a form to
// try each operation against this broker. No third-party code.
import { authorization } from "/console/api.js";
import { h } from "/console/dom.js";

/** Headers of this page's requests: the console's login (this tab's), if any. */
function authHeaders() {
  const auth = authorization();
  return { "X-Kafkalite-Console": "1", ...(auth ? { Authorization: auth } : {}) };
}

const root = document.getElementById("docs");
const answer = await fetch("/openapi.json", { headers: authHeaders(), credentials: "omit" });
if (answer.status === 401) location.href = "/#/login";
const doc = await answer.json();
const schemas = doc.components.schemas;

function resolve(schema) {
  return schema && schema.$ref ? schemas[schema.$ref.split("/").pop()] : schema;
}

function typeText(schema) {
  if (!schema) return "any";
  if (schema.$ref) return schema.$ref.split("/").pop();
  if (schema.anyOf) return schema.anyOf.map(typeText).join(" | ");
  if (schema.oneOf) return schema.oneOf.map(typeText).join(" | ");
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.type === "array") return `${typeText(schema.items)}[]`;
  if (schema.type === "object" && schema.additionalProperties && !schema.properties)
    return `{string: ${typeText(schema.additionalProperties)}}`;
  const bounds = [];
  if (schema.minimum !== undefined) bounds.push(`≥ ${schema.minimum}`);
  if (schema.maximum !== undefined) bounds.push(`≤ ${schema.maximum}`);
  if (schema.minItems) bounds.push(`min ${schema.minItems} items`);
  return (schema.type || "object") + (bounds.length ? ` (${bounds.join(", ")})` : "");
}

function schemaView(schema, depth = 0, seen = new Set()) {
  const name = schema && schema.$ref ? schema.$ref.split("/").pop() : null;
  const target = resolve(schema);
  if (!target || depth > 4 || (name && seen.has(name))) return h("code", {}, typeText(schema));
  const next = new Set(seen);
  if (name) next.add(name);
  const parts = [];
  if (name) parts.push(h("div", { class: "schema-name" }, name));
  if (target.description) parts.push(h("p", { class: "muted" }, target.description));
  if (target.oneOf) {
    parts.push(h("div", {}, "one of:"));
    for (const option of target.oneOf) parts.push(schemaView(option, depth + 1, next));
  } else if (target.properties) {
    const required = new Set(target.required || []);
    const rows = Object.entries(target.properties).map(([key, prop]) => {
      const inner = resolve(prop.anyOf ? prop.anyOf.find((p) => p.type !== "null") : prop);
      const nested = inner && (inner.properties || inner.oneOf) && depth < 3;
      return h("tr", {},
        h("td", {}, h("code", {}, key), required.has(key) ? " *" : ""),
        h("td", {}, typeText(prop)),
        h("td", {}, prop.description || (prop.pattern ? `pattern ${prop.pattern}` : ""),
          nested ? schemaView(prop.anyOf ? prop.anyOf.find((p) => p.type !== "null") : prop,
            depth + 1, next) : ""));
    });
    parts.push(h("table", { class: "grid" },
      h("tr", {}, h("th", {}, "field"), h("th", {}, "type"), h("th", {}, "notes")), ...rows));
  } else {
    parts.push(h("code", {}, typeText(target)));
  }
  return h("div", { class: "schema" }, ...parts);
}

function tryForm(path, method, op) {
  const inputs = {};
  const fields = (op.parameters || []).map((p) => {
    inputs[p.name] = h("input", { placeholder: typeText(p.schema), "data-in": p.in });
    return h("label", {}, `${p.name}${p.required ? " *" : ""} `, inputs[p.name]);
  });
  let body = null;
  if (op.requestBody) {
    const example = resolve(op.requestBody.content["application/json"].schema).example;
    body = h("textarea", { rows: 4 }, example ? JSON.stringify(example, null, 2) : "{}");
  }
  const out = h("pre", { class: "answer" });
  const send = h("button", {}, "Send");
  send.addEventListener("click", async () => {
    let url = path;
    const query = new URLSearchParams();
    for (const [name, input] of Object.entries(inputs)) {
      if (!input.value) continue;
      if (input.dataset.in === "path") url = url.replace(`{${name}}`, encodeURIComponent(input.value));
      else query.set(name, input.value);
    }
    if ([...query].length) url += `?${query}`;
    const init = { method: method.toUpperCase(), headers: authHeaders(), credentials: "omit" };
    if (body) init.body = body.value;
    if (body) init.headers["Content-Type"] = "application/json";
    const response = await fetch(url, init);
    const text = await response.text();
    let shown = text;
    try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch { /* not JSON */ }
    out.textContent = `${response.status} ${response.statusText}\n${shown.slice(0, 20000)}`;
  });
  const destructive = method !== "get";
  return h("details", { class: "try" }, h("summary", {}, destructive ? "Try it (changes the cluster)" : "Try it"),
    ...fields, body || "", send, out);
}

const byTag = new Map();
for (const [path, item] of Object.entries(doc.paths)) {
  for (const [method, op] of Object.entries(item)) {
    const tag = (op.tags || ["other"])[0];
    if (!byTag.has(tag)) byTag.set(tag, []);
    byTag.get(tag).push([path, method, op]);
  }
}
root.replaceChildren(
  h("h1", {}, doc.info.title, h("span", { class: "muted" }, ` ${doc.info.version}`)),
  h("p", {}, doc.info.description),
  ...[...byTag].map(([tag, ops]) => h("section", {}, h("h2", {}, tag),
    ...ops.map(([path, method, op]) => h("details", { class: "op", id: op.operationId },
      h("summary", {}, h("span", { class: `method ${method}` }, method.toUpperCase()), " ",
        h("code", {}, path), " ", h("span", { class: "muted" }, op.summary)),
      op.description ? h("p", {}, op.description) : "",
      op.parameters ? h("table", { class: "grid" },
        h("tr", {}, h("th", {}, "parameter"), h("th", {}, "in"), h("th", {}, "type"), h("th", {}, "notes")),
        ...op.parameters.map((p) => h("tr", {}, h("td", {}, h("code", {}, p.name), p.required ? " *" : ""),
          h("td", {}, p.in), h("td", {}, typeText(p.schema)), h("td", {}, p.description || "")))) : "",
      op.requestBody ? h("div", {}, h("h4", {}, "Request body"),
        schemaView(op.requestBody.content["application/json"].schema)) : "",
      ...Object.entries(op.responses).map(([status, answer]) => h("div", {},
        h("h4", {}, `${status}: ${answer.description}`),
        answer.content && answer.content["application/json"]
          ? schemaView(answer.content["application/json"].schema)
          : h("code", {}, Object.keys(answer.content || {}).join(", ")))),
      tryForm(path, method, op))))),
);
