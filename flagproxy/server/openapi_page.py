"""The interactive API page at /docs/openapi (and /docs): plain HTML and JavaScript, no CDN, so it works
offline. It lists every operation of the OpenAPI document and can send requests with your API token.

sanic-ext serves the page through its Redoc slot (it reads a file and fills in `__URL_PREFIX__` and
`__URI_TO_JSON__`); the page is kept here as a string so it ships inside the package whatever the build
includes, and `page_file()` writes it out once.
"""

import hashlib
import tempfile
from pathlib import Path

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>flagproxy server API</title>
<style>
 body { font: 14px/1.4 system-ui, sans-serif; margin: 0 auto; max-width: 1100px; padding: 1em; color: #222; }
 h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.5em; border-bottom: 1px solid #ccc; }
 details { border: 1px solid #ddd; border-radius: 4px; margin: .3em 0; padding: .3em .6em; }
 summary { cursor: pointer; } .method { display: inline-block; width: 4.5em; font-weight: bold; }
 .get { color: #1565c0; } .post { color: #2e7d32; } .put { color: #ef6c00; } .delete { color: #c62828; }
 textarea, input { font: 12px monospace; width: 100%; box-sizing: border-box; }
 pre { background: #f6f6f6; padding: .5em; overflow: auto; max-height: 25em; }
 .token { position: sticky; top: 0; background: #fff; padding: .5em 0; border-bottom: 1px solid #ccc; }
</style>
</head>
<body>
<h1 id="title">flagproxy server API</h1>
<p id="description"></p>
<div class="token"><label>Authorization (API token):
 <input id="token" placeholder="*:*.your-admin-token"></label></div>
<div id="operations">Loading <a href="__URL_PREFIX__/__URI_TO_JSON__">openapi.json</a>...</div>
<script>
"use strict";
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const child of children) node.append(child);
  return node;
};
function schemaOf(spec, schema) {
  if (schema && schema.$ref) return spec.components.schemas[schema.$ref.split("/").pop()] || schema;
  return schema;
}
function operationView(spec, path, method, op) {
  const params = (op.parameters || []).filter(p => p.in === "path");
  const box = el("details", {}, el("summary", {},
    el("span", {class: "method " + method}, method.toUpperCase()), path + " ",
    el("small", {}, op.summary || "")));
  if (op.description) box.append(el("p", {}, op.description));
  const inputs = {};
  for (const p of params) {
    inputs[p.name] = el("input", {placeholder: p.name});
    box.append(el("label", {}, p.name + ":", inputs[p.name]));
  }
  const query = el("input", {placeholder: "query string, e.g. namePrefix=x"});
  box.append(el("label", {}, "query:", query));
  let body = null;
  const content = op.requestBody && op.requestBody.content && op.requestBody.content["application/json"];
  if (content) {
    const shown = JSON.stringify(schemaOf(spec, content.schema), null, 1);
    box.append(el("p", {}, "Body schema:"), el("pre", {}, shown));
    body = el("textarea", {rows: 6, placeholder: "JSON body"});
    box.append(body);
  }
  const out = el("pre", {}, "");
  const send = el("button", {}, "Send");
  send.onclick = async () => {
    let url = path.replace(/\\{(\\w+)\\}|<(\\w+)>/g, (_, a, b) => encodeURIComponent(inputs[a || b].value));
    if (query.value) url += "?" + query.value;
    const headers = {"Authorization": document.getElementById("token").value};
    const init = {method: method.toUpperCase(), headers};
    if (body && body.value) { headers["Content-Type"] = "application/json"; init.body = body.value; }
    try {
      const res = await fetch(url, init);
      const text = await res.text();
      let shown = text;
      try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch (e) {}
      out.textContent = res.status + " " + res.statusText + "\\n\\n" + shown;
    } catch (e) { out.textContent = String(e); }
  };
  box.append(send, out);
  return box;
}
fetch("__URL_PREFIX__/__URI_TO_JSON__").then(r => r.json()).then(spec => {
  document.getElementById("title").textContent = spec.info.title + " " + spec.info.version;
  document.getElementById("description").textContent = spec.info.description || "";
  const groups = {};
  for (const [path, ops] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      if (!["get", "post", "put", "delete", "patch"].includes(method)) continue;
      const tag = (op.tags && op.tags[0]) || "Other";
      (groups[tag] = groups[tag] || []).push([path, method, op]);
    }
  }
  const root = document.getElementById("operations");
  root.textContent = "";
  for (const tag of Object.keys(groups).sort()) {
    root.append(el("h2", {}, tag));
    for (const [path, method, op] of groups[tag]) root.append(operationView(spec, path, method, op));
  }
});
</script>
</body>
</html>
"""


def page_file() -> str:
    """A file holding PAGE, for sanic-ext's OAS_PATH_TO_REDOC_HTML; named by content, written once."""
    digest = hashlib.sha256(PAGE.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"flagproxy-openapi-{digest}.html"
    if not path.exists():
        partial = path.with_suffix(f".{digest}.tmp")
        partial.write_text(PAGE, encoding="utf-8")
        partial.replace(path)
    return str(path)
