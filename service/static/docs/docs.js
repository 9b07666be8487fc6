// The service's own API reference: reads /openapi.json and renders operations, parameters, bodies,
// responses and schemas, with a "try it" form per operation (fetch, same origin). No external assets.
"use strict";

const KEY_STORE = "kpca-api-key";
const METHODS = ["get", "post", "put", "patch", "delete"];
let doc = null;

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props || {});
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

// Text of the OpenAPI document as the page shows it: ``code`` and `code` (the docstrings' markup) as
// <code>, the rest as text, line breaks kept (CSS white-space: pre-line).
function prose(text, tag) {
  const node = el(tag || "span", { className: "prose" });
  const parts = String(text || "").split(/``([^`]+)``|`([^`]+)`/);
  for (let i = 0; i < parts.length; i += 3) {
    if (parts[i]) node.append(parts[i]);
    const code = parts[i + 1] || parts[i + 2];
    if (code) node.append(el("code", { textContent: code }));
  }
  return node;
}

function authHeaders() {
  const key = document.getElementById("api-key").value.trim();
  return key ? { Authorization: "Bearer " + key } : {};
}

function resolve(schema) {
  // follow a local $ref ("#/components/schemas/Name")
  let seen = 0;
  while (schema && schema.$ref && seen++ < 20) {
    schema = schema.$ref.split("/").slice(1).reduce((node, part) => (node || {})[part], doc);
  }
  return schema || {};
}

function typeName(schema) {
  if (!schema) return "";
  if (schema.$ref) {
    const name = schema.$ref.split("/").pop();
    return el("a", { href: "#schema-" + name, textContent: name });
  }
  if (schema.anyOf || schema.oneOf) {
    const span = el("span");
    (schema.anyOf || schema.oneOf).forEach((part, i) => {
      if (i) span.append(" | ");
      span.append(typeName(part));
    });
    return span;
  }
  if (schema.type === "array") {
    const span = el("span", {}, "array of ");
    span.append(typeName(schema.items || {}));
    return span;
  }
  let text = schema.type || (schema.enum ? "enum" : schema.const !== undefined ? "const" : "any");
  if (schema.format) text += " (" + schema.format + ")";
  if (schema.enum) text += ": " + schema.enum.join(" | ");
  return text;
}

function constraints(schema) {
  const keys = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
                "pattern", "minItems", "maxItems", "default"];
  return keys.filter((k) => schema[k] !== undefined).map((k) => k + " " + JSON.stringify(schema[k])).join(", ");
}

function propertiesTable(schema) {
  const table = el("table", {}, el("tr", {}, el("th", { textContent: "property" }), el("th", { textContent: "type" }),
                                   el("th", { textContent: "description" }), el("th", { textContent: "limits" })));
  const required = new Set(schema.required || []);
  for (const [name, prop] of Object.entries(schema.properties || {})) {
    table.append(el("tr", {}, el("td", {}, el("code", { textContent: name + (required.has(name) ? " *" : "") })),
                    el("td", {}, typeName(prop)), el("td", {}, prose(prop.description)),
                    el("td", { textContent: constraints(prop) })));
  }
  return table;
}

function example(schema, depth) {
  schema = resolve(schema);
  if (depth > 4) return null;
  if (schema.example !== undefined) return schema.example;
  if (schema.default !== undefined) return schema.default;
  if (schema.anyOf || schema.oneOf) return example((schema.anyOf || schema.oneOf)[0], depth + 1);
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return schema.enum[0];
  if (schema.type === "object" || schema.properties) {
    const out = {};
    for (const name of schema.required || []) out[name] = example(schema.properties[name], depth + 1);
    return out;
  }
  if (schema.type === "array") return [];
  if (schema.type === "integer" || schema.type === "number") return schema.minimum || 1;
  if (schema.type === "boolean") return false;
  if (schema.type === "string") return "";
  return null;
}

function tryForm(path, method, operation) {
  const form = el("form", { className: "try" });
  const inputs = [];
  for (const param of operation.parameters || []) {
    const input = el("input", { name: param.name, placeholder: param.in + (param.required ? ", required" : "") });
    const schema = resolve(param.schema);
    if (schema.default !== undefined) input.value = schema.default;
    inputs.push([param, input]);
    form.append(el("label", {}, param.name + " ", input), el("br"));
  }
  const content = (operation.requestBody || {}).content || {};
  const mediaType = Object.keys(content)[0];
  let bodyInput = null;
  if (mediaType === "application/json") {
    bodyInput = el("textarea", { value: JSON.stringify(example(content[mediaType].schema, 0), null, 2) });
  } else if (mediaType) {
    bodyInput = el("input", { type: "file" });
  }
  if (bodyInput) form.append(el("label", {}, "body (" + mediaType + ")"), el("br"), bodyInput, el("br"));
  const output = el("div");
  form.append(el("button", { type: "submit", textContent: "Send" }), output);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let url = path;
    const query = new URLSearchParams();
    for (const [param, input] of inputs) {
      if (input.value === "") continue;
      if (param.in === "path") url = url.replace("{" + param.name + "}", encodeURIComponent(input.value));
      else if (param.in === "query") query.append(param.name, input.value);
    }
    if ([...query].length) url += "?" + query;
    const init = { method: method.toUpperCase(), headers: authHeaders() };
    if (mediaType) {
      init.headers["Content-Type"] = mediaType;
      init.body = bodyInput.type === "file" ? (bodyInput.files[0] || new Blob()) : bodyInput.value;
    }
    output.replaceChildren(el("p", { textContent: init.method + " " + url + " ..." }));
    try {
      const response = await fetch(url, init);
      const type = response.headers.get("content-type") || "";
      const head = el("p", { textContent: response.status + " " + response.statusText + " (" + type + ")" });
      if (type.startsWith("image/")) {
        const img = el("img", { src: URL.createObjectURL(await response.blob()), alt: "response image" });
        output.replaceChildren(head, img);
      } else if (type.startsWith("text/event-stream")) {
        output.replaceChildren(head, el("pre", { textContent: "(an event stream: open " + url + " with EventSource or curl -N)" }));
        response.body && response.body.cancel();
      } else {
        let text = await response.text();
        if (type.includes("json")) { try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* as sent */ } }
        output.replaceChildren(head, el("pre", { textContent: text }));
      }
    } catch (error) {
      output.replaceChildren(el("p", { className: "error", textContent: String(error) }));
    }
  });
  return form;
}

function renderOperation(path, method, operation) {
  const box = el("details", { id: operation.operationId || method + path });
  box.append(el("summary", {}, el("span", { className: "method " + method, textContent: method.toUpperCase() }),
                el("span", { className: "path", textContent: path }), " ", operation.summary || ""));
  if (operation.description) box.append(prose(operation.description, "div"));
  if ((operation.parameters || []).length) {
    const table = el("table", {}, el("tr", {}, el("th", { textContent: "parameter" }), el("th", { textContent: "in" }),
                                     el("th", { textContent: "type" }), el("th", { textContent: "description" })));
    for (const param of operation.parameters) {
      const schema = param.schema || {};
      table.append(el("tr", {}, el("td", {}, el("code", { textContent: param.name + (param.required ? " *" : "") })),
                      el("td", { textContent: param.in }), el("td", {}, typeName(schema), " ", constraints(resolve(schema))),
                      el("td", {}, prose(param.description || schema.description))));
    }
    box.append(el("h4", { textContent: "Parameters" }), table);
  }
  for (const [type, media] of Object.entries((operation.requestBody || {}).content || {})) {
    box.append(el("h4", {}, "Request body: " + type + " ", typeName(media.schema || {})));
  }
  const responses = el("table", {}, el("tr", {}, el("th", { textContent: "status" }), el("th", { textContent: "description" }),
                                       el("th", { textContent: "content" })));
  for (const [code, response] of Object.entries(operation.responses || {})) {
    const cell = el("td");
    for (const [type, media] of Object.entries(response.content || {})) cell.append(type + " ", typeName(media.schema), el("br"));
    responses.append(el("tr", {}, el("td", { textContent: code }), el("td", {}, prose(response.description)), cell));
  }
  box.append(el("h4", { textContent: "Responses" }), responses, tryForm(path, method, operation));
  return box;
}

function render() {
  document.getElementById("title").textContent = doc.info.title + " " + doc.info.version;
  document.getElementById("summary").replaceChildren(prose(doc.info.summary || doc.info.description));
  const groups = new Map();
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const method of METHODS) {
      if (!item[method]) continue;
      const tag = (item[method].tags || ["other"])[0];
      if (!groups.has(tag)) groups.set(tag, []);
      groups.get(tag).push(renderOperation(path, method, item[method]));
    }
  }
  const main = document.getElementById("operations");
  const toc = document.getElementById("toc");
  main.replaceChildren();
  toc.replaceChildren();
  for (const [tag, boxes] of groups) {
    toc.append(el("a", { href: "#tag-" + tag, textContent: tag }));
    main.append(el("h2", { id: "tag-" + tag, textContent: tag }), ...boxes);
  }
  toc.append(el("a", { href: "#schemas-section", textContent: "schemas" }));
  const schemas = document.getElementById("schemas");
  schemas.replaceChildren();
  for (const [name, schema] of Object.entries((doc.components || {}).schemas || {})) {
    const box = el("details", { id: "schema-" + name }, el("summary", {}, el("code", { textContent: name })));
    if (schema.description) box.append(prose(schema.description, "p"));
    if (schema.properties) box.append(propertiesTable(schema));
    else box.append(el("p", {}, typeName(schema)));
    schemas.append(box);
  }
}

async function load() {
  const status = document.getElementById("status");
  status.className = "";
  status.textContent = "loading /openapi.json ...";
  try {
    const response = await fetch("/openapi.json", { headers: authHeaders() });
    if (response.status === 401 || response.status === 403) {
      status.className = "error";
      status.textContent = "this service needs an API key (" + response.status + "): enter it above";
      return;
    }
    if (!response.ok) throw new Error("GET /openapi.json: " + response.status);
    doc = await response.json();
    render();
    status.textContent = "";
  } catch (error) {
    status.className = "error";
    status.textContent = String(error);
  }
}

document.getElementById("api-key").value = sessionStorage.getItem(KEY_STORE) || "";
document.getElementById("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(KEY_STORE, document.getElementById("api-key").value.trim());
  load();
});
load();
