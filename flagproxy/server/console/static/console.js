// The console's one script (no inline script anywhere: the Content-Security-Policy forbids it).
// It does three things for htmx: copies the CSRF cookie into X-CSRF-Token on every request, turns
// forms into the JSON bodies the admin API takes (checking them first), and, when the API answers,
// shows its error message next to the form or does what the form's data-then says.
(function () {
  "use strict";

  function cookie(name) {
    var parts = document.cookie ? document.cookie.split("; ") : [];
    for (var i = 0; i < parts.length; i++) {
      var eq = parts[i].indexOf("=");
      if (parts[i].slice(0, eq) === name) return decodeURIComponent(parts[i].slice(eq + 1));
    }
    return "";
  }

  function formOf(elt) {
    return elt.closest("form") || elt;
  }

  function errorBox(elt) {
    var form = formOf(elt);
    return form.querySelector("[data-error]") || document.getElementById("page-error");
  }

  function showError(elt, message) {
    var box = errorBox(elt);
    if (box) {
      box.textContent = message;
      box.hidden = false;
    }
  }

  function clearError(elt) {
    var box = errorBox(elt);
    if (box) {
      box.textContent = "";
      box.hidden = true;
    }
  }

  // Field names carry their JSON type after a colon: "rollout" (text), "weight:number",
  // "enabled:bool" (a checkbox: unchecked is false), "values:list" (one per line or comma),
  // "payload:json" (parsed), "projects:array" (every field of that name). Dots nest: "payload.type".
  // Empty text fields are left out, so the API's defaults apply.
  function setPath(target, path, value) {
    var keys = path.split(".");
    for (var i = 0; i < keys.length - 1; i++) {
      if (typeof target[keys[i]] !== "object" || target[keys[i]] === null) target[keys[i]] = {};
      target = target[keys[i]];
    }
    target[keys[keys.length - 1]] = value;
  }

  function convert(raw, type, label) {
    if (type === "number") {
      if (!/^-?\d+(\.\d+)?$/.test(raw.trim())) throw new Error(label + " must be a number");
      return Number(raw);
    }
    if (type === "list") {
      return raw.split(/[\n,]/).map(function (v) { return v.trim(); }).filter(function (v) { return v !== ""; });
    }
    if (type === "json") {
      try { return JSON.parse(raw); } catch (e) { throw new Error(label + " is not valid JSON: " + e.message); }
    }
    return raw;
  }

  function formJson(form) {
    var body = {};
    var fields = form.querySelectorAll("input[name], select[name], textarea[name]");
    for (var i = 0; i < fields.length; i++) {
      var field = fields[i];
      if (field.disabled) continue;
      var parts = field.name.split(":");
      var path = parts[0];
      var type = parts[1] || "text";
      var label = field.getAttribute("data-label") || path;
      if (type === "bool") {
        setPath(body, path, field.checked);
        continue;
      }
      if ((field.type === "checkbox" || field.type === "radio") && !field.checked) continue;
      if (type === "array") {
        var list = path.split(".").reduce(function (o, k) { return o && o[k]; }, body) || [];
        list.push(field.value);
        setPath(body, path, list);
        continue;
      }
      if (field.value === "" && type !== "list") {
        if (field.required) throw new Error(label + " is required");
        continue;
      }
      setPath(body, path, convert(field.value, type, label));
    }
    return body;
  }

  // Editors with a structure a flat form cannot say (a strategy's constraint rows) register a builder.
  var builders = {};
  window.flagproxyConsole = { builders: builders, formJson: formJson, showError: showError };

  htmx.defineExtension("json-form", {
    onEvent: function (name, event) {
      if (name !== "htmx:configRequest") return true;
      var elt = event.detail.elt;
      var form = formOf(elt);
      try {
        var builder = builders[form.getAttribute("data-builder")];
        form._flagproxyJson = JSON.stringify(builder ? builder(form) : formJson(form));
      } catch (problem) {
        showError(elt, problem.message);
        event.preventDefault();
        return false;
      }
      event.detail.headers["Content-Type"] = "application/json";
      return true;
    },
    encodeParameters: function (xhr, parameters, elt) {
      xhr.overrideMimeType("text/json");
      return formOf(elt)._flagproxyJson;
    },
  });

  document.addEventListener("htmx:configRequest", function (event) {
    var token = cookie("flagproxy_csrf");
    if (token) event.detail.headers["X-CSRF-Token"] = token;
  });

  function apiMessage(xhr) {
    try {
      var record = JSON.parse(xhr.responseText);
      if (record && record.message) return record.message;
    } catch (e) { /* not JSON */ }
    return "The server answered " + xhr.status + " " + xhr.statusText;
  }

  document.addEventListener("htmx:sendError", function (event) {
    showError(event.detail.elt, "The server could not be reached.");
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail.elt;
    var xhr = event.detail.xhr;
    if (!xhr || xhr.status === 0) return;
    var form = formOf(elt);
    var then = elt.getAttribute("data-then") || form.getAttribute("data-then") || "";
    if (xhr.status >= 400) {
      if (elt.type === "checkbox") elt.checked = !elt.checked; // the switch did not move
      showError(elt, apiMessage(xhr));
      return;
    }
    clearError(elt);
    if (then === "reload") {
      window.location.reload();
    } else if (then.indexOf("redirect:") === 0) {
      window.location.assign(then.slice("redirect:".length));
    } else if (then === "refresh") {
      htmx.trigger(document.body, "refresh");
    } else if (then.indexOf("reveal:") === 0) {
      // A secret shown once: the API's answer goes into the page, never anywhere else.
      var answer = JSON.parse(xhr.responseText);
      var target = document.querySelector(then.slice("reveal:".length));
      target.querySelector("[data-secret]").textContent = answer.url || answer.secret;
      target.hidden = false;
      htmx.trigger(document.body, "refresh");
    }
    if (form.tagName === "FORM" && form.hasAttribute("data-reset")) form.reset();
  });
})();
