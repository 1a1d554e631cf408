# ruff: noqa: E501  (an embedded HTML page; its lines are not Python)
"""The interactive API page at /docs/openapi: one self-contained HTML file, no CDN, works offline.

It lists every operation of the OpenAPI document (inlined into the page) and lets the reader send a
request with a client key, query string and JSON body, showing status, headers and body.
"""

from __future__ import annotations

from typing import Any

import orjson

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>flagproxy API</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
main{max-width:980px;margin:0 auto;padding:16px 24px}
.key{margin:12px 0;padding:10px;background:#fff;border:1px solid #d6d9e0;border-radius:6px}
details{background:#fff;border:1px solid #d6d9e0;border-radius:6px;margin:8px 0}
summary{cursor:pointer;padding:10px;display:flex;gap:10px;align-items:center}
.m{font-weight:700;text-transform:uppercase;width:52px;text-align:center;border-radius:4px;color:#fff;padding:2px 0}
.get{background:#2f7ed8}.post{background:#2fa36b}
.p{font-family:ui-monospace,monospace}.s{color:#5a6172}
.op{padding:0 12px 12px}label{display:block;margin-top:8px;font-size:13px;color:#5a6172}
input,textarea{width:100%;box-sizing:border-box;font-family:ui-monospace,monospace;font-size:13px;padding:6px}
textarea{height:90px}button{margin-top:10px;padding:6px 14px;cursor:pointer}
pre{background:#f0f2f5;padding:8px;overflow:auto;max-height:320px;white-space:pre-wrap}
table{border-collapse:collapse;font-size:13px}td{padding:2px 8px;border-bottom:1px solid #e4e6eb}
</style>
</head>
<body>
<header><h1 id="title"></h1></header>
<main>
<div class="key"><label for="key">Client key (sent in the <span class="p" id="keyname"></span> header)</label>
<input id="key" placeholder="your client key"></div>
<div id="ops"></div>
</main>
<script>
const SPEC = __SPEC__;
const base = (SPEC.servers[0] || {url: ""}).url;
const keyHeader = SPEC.components.securitySchemes.apiKey.name;
document.getElementById("title").textContent = SPEC.info.title + " " + SPEC.info.version;
document.getElementById("keyname").textContent = keyHeader;
const el = (tag, attrs, ...kids) => { const e = document.createElement(tag);
  Object.entries(attrs || {}).forEach(([k, v]) => e.setAttribute(k, v));
  kids.forEach(k => e.append(k)); return e; };
const examples = {lookupTogglesSchema: '{"toggles": [], "context": {"userId": "42", "properties": {}}}',
  registerMetricsSchema: '{"appName": "web", "instanceId": "browser-1", "bucket": {"start": "2024-01-01T00:00:00Z", "stop": "2024-01-01T00:01:00Z", "toggles": {}}}',
  registerClientSchema: '{"appName": "web", "interval": 15000, "started": "2024-01-01T00:00:00Z", "strategies": ["default"]}'};
for (const [path, methods] of Object.entries(SPEC.paths)) {
  for (const [method, op] of Object.entries(methods)) {
    const query = el("input", {placeholder: "userId=42&properties[region]=eu"});
    const body = el("textarea");
    const ref = (((op.requestBody || {}).content || {})["application/json"] || {}).schema;
    if (ref) body.value = examples[ref.$ref.split("/").pop()] || "{}";
    const out = el("div");
    const send = el("button", {}, "Send");
    send.onclick = async () => {
      const headers = {}; const key = document.getElementById("key").value;
      if (key) headers[keyHeader] = key;
      const init = {method: method.toUpperCase(), headers};
      if (method === "post") { headers["Content-Type"] = "application/json"; init.body = body.value; }
      const url = base + path + (query.value ? "?" + query.value : "");
      out.textContent = "…";
      try {
        const r = await fetch(url, init); const text = await r.text();
        const rows = el("table");
        r.headers.forEach((v, k) => rows.append(el("tr", {}, el("td", {}, k), el("td", {}, v))));
        let shown = text; try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch (e) {}
        out.replaceChildren(el("p", {}, method.toUpperCase() + " " + url + " → " + r.status + " " + r.statusText), rows, el("pre", {}, shown));
      } catch (e) { out.textContent = "Request failed: " + e; }
    };
    const codes = Object.entries(op.responses).map(([c, r]) => c + " " + r.description).join("\\n");
    const fields = [el("p", {class: "s"}, (op.tags || []).join(", "))];
    if (op.parameters) fields.push(el("label", {}, "Query string"), query);
    if (ref) fields.push(el("label", {}, "JSON body"), body);
    fields.push(send, el("label", {}, "Responses"), el("pre", {}, codes), out);
    document.getElementById("ops").append(el("details", {},
      el("summary", {}, el("span", {class: "m " + method}, method), el("span", {class: "p"}, base + path), el("span", {class: "s"}, op.summary)),
      el("div", {class: "op"}, ...fields)));
  }
}
</script>
</body>
</html>
"""


def build_docs_page(spec: dict[str, Any]) -> bytes:
    # `</` inside the inlined JSON would end the script element early.
    inline = orjson.dumps(spec).decode().replace("</", "<\\/")
    return _PAGE.replace("__SPEC__", inline).encode()
