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
  // "payload:json" (parsed), "projects:array" (every field of that name), "users:numbers" (the same, as
// numbers; an empty choice adds nothing). Dots nest: "payload.type".
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
      if (type === "array" || type === "numbers") {
        var list = path.split(".").reduce(function (o, k) { return o && o[k]; }, body) || [];
        if (field.value !== "") list.push(type === "numbers" ? Number(field.value) : field.value);
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

  // ---- the strategy editor ------------------------------------------------------------------------
  function singleValueOperators() {
    var holder = document.getElementById("single-value-operators");
    return holder ? holder.getAttribute("data-operators").split(" ") : [];
  }

  var CHECKS = {
    NUM: [/^-?\d+(\.\d+)?$/, "a number"],
    DATE: [/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/, "a date like 2026-01-31T12:00:00Z"],
    SEMVER: [/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/, "a semantic version like 1.2.3"],
  };

  // An IPv4 or IPv6 address, with or without a /prefix (the server parses it exactly).
  var CIDR = /^((\d{1,3}\.){3}\d{1,3}(\/\d{1,2})?|[0-9A-Fa-f]*:[0-9A-Fa-f:.]*(\/\d{1,3})?)$/;

  // One constraint row -> the API's constraint, or an Error saying what is wrong with it.
  function constraintOf(row, index) {
    function field(name) { return row.querySelector('[data-c="' + name + '"]'); }
    var label = "Constraint " + (index + 1) + ": ";
    var constraint = {
      contextName: field("contextName").value.trim(),
      operator: field("operator").value,
      caseInsensitive: field("caseInsensitive").checked,
      inverted: field("inverted").checked,
    };
    if (!constraint.contextName) throw new Error(label + "choose a context field");
    if (singleValueOperators().indexOf(constraint.operator) >= 0) {
      var value = field("value").value.trim();
      if (!value) throw new Error(label + constraint.operator + " needs a value");
      var check = CHECKS[constraint.operator.split("_")[0]];
      if (check && !check[0].test(value)) throw new Error(label + "the value must be " + check[1]);
      if (constraint.operator === "REGEX") {
        try { new RegExp(value); } catch (e) { throw new Error(label + "the pattern is not valid: " + e.message); }
      }
      constraint.value = value;
      constraint.values = [];
    } else {
      constraint.values = convert(field("values").value, "list", "values");
      if (!constraint.values.length) throw new Error(label + constraint.operator + " needs at least one value");
      if (constraint.operator === "IN_CIDR") {
        constraint.values.forEach(function (entry) {
          if (!CIDR.test(entry)) throw new Error(label + entry + " is not an IP address or CIDR range");
        });
      }
    }
    return constraint;
  }

  // One variant row -> the API's variant, or an Error saying what is wrong with it.
  function variantOf(row, index, seen) {
    function field(name) { return row.querySelector('[data-v="' + name + '"]'); }
    var label = "Variant " + (index + 1) + ": ";
    var name = field("name").value.trim();
    if (!name) throw new Error(label + "needs a name");
    if (seen[name]) throw new Error(label + "the name " + name + " is used twice");
    seen[name] = true;
    var variant = {
      name: name,
      weightType: field("weightType").value,
      stickiness: field("stickiness").value.trim() || "default",
      weight: 0, // a variable weight is the server's to share out (Unleash's fixVariantWeights)
    };
    if (variant.weightType === "fix") {
      var weight = field("weight").value.trim();
      if (!/^\d+(\.\d)?$/.test(weight) || Number(weight) > 100) {
        throw new Error(label + "a fixed weight is a percentage from 0 to 100 (one decimal at most)");
      }
      variant.weight = Math.round(Number(weight) * 10);
    }
    var type = field("payloadType").value;
    if (type) {
      var value = field("payloadValue").value;
      if (type === "json") {
        try { JSON.parse(value); } catch (e) { throw new Error(label + "the JSON payload is not valid JSON: " + e.message); }
      }
      if (type === "number" && !/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(value.trim())) {
        throw new Error(label + "the number payload is not a number");
      }
      variant.payload = { type: type, value: value };
    }
    var overrides = field("overrides");
    if (overrides) {
      variant.overrides = [];
      var lines = overrides.value.split("\n");
      for (var i = 0; i < lines.length; i++) {
        var line = lines[i].trim();
        if (!line) continue;
        var eq = line.indexOf("=");
        if (eq < 1) throw new Error(label + "an override is field=value1,value2 (line " + (i + 1) + ")");
        variant.overrides.push({ contextName: line.slice(0, eq).trim(), values: convert(line.slice(eq + 1), "list", "values") });
      }
    }
    return variant;
  }

  function variantsOf(form) {
    var rows = form.querySelectorAll("[data-variant-rows] > .variant-row");
    var seen = {};
    var variants = [];
    for (var i = 0; i < rows.length; i++) {
      try {
        variants.push(variantOf(rows[i], i, seen));
      } catch (problem) {
        markInvalid(form, rows[i]);
        throw problem;
      }
    }
    return variants;
  }

  function markInvalid(form, row) {
    var rows = form.querySelectorAll(".constraint-row, .variant-row");
    for (var i = 0; i < rows.length; i++) rows[i].classList.toggle("invalid", rows[i] === row);
  }

  builders.strategy = function (form) {
    var name = form.querySelector("[name=name]").value;
    var body = { name: name, parameters: {}, constraints: [], segments: [] };
    var title = form.querySelector("[name=title]").value.trim();
    if (title) body.title = title;
    body.disabled = form.querySelector("[name=disabled]").checked;
    var order = form.querySelector("[name=sortOrder]");
    if (order) body.sortOrder = Number(order.value);
    var fieldsets = form.querySelectorAll("fieldset[data-for]");
    for (var i = 0; i < fieldsets.length; i++) {
      if (fieldsets[i].getAttribute("data-for").split(" ").indexOf(name) < 0) continue;
      var params = fieldsets[i].querySelectorAll("[data-param]");
      for (var j = 0; j < params.length; j++) {
        var input = params[j];
        if (input.closest("[hidden]")) continue;
        var key = input.getAttribute("data-param");
        var value = input.value.trim();
        if (input.getAttribute("data-kind") === "percent") {
          if (!/^\d+$/.test(value) || Number(value) > 100) throw new Error(key + " must be a whole number from 0 to 100");
        }
        if (input.getAttribute("data-kind") === "list") value = convert(value, "list", key).join(",");
        body.parameters[key] = value;
      }
    }
    body.constraints = constraintsOf(form);
    var segments = form.querySelectorAll("[data-segment]:checked");
    for (var n = 0; n < segments.length; n++) body.segments.push(Number(segments[n].value));
    body.variants = variantsOf(form);
    return body;
  };

  builders.variants = variantsOf;

  function checkedValues(form, selector) {
    var found = [];
    var boxes = form.querySelectorAll(selector + ":checked");
    for (var i = 0; i < boxes.length; i++) {
      if (!boxes[i].closest("[hidden]")) found.push(boxes[i].value);
    }
    return found;
  }

  function constraintsOf(form) {
    var found = [];
    var rows = form.querySelectorAll(".constraint-row");
    for (var k = 0; k < rows.length; k++) {
      try {
        found.push(constraintOf(rows[k], k));
      } catch (problem) {
        markInvalid(form, rows[k]);
        throw problem;
      }
    }
    markInvalid(form, null);
    return found;
  }

  builders.role = function (form) {
    var body = formJson(form);
    body.permissions = checkedValues(form, "[data-permission]").map(function (name) { return { name: name }; });
    return body;
  };

  builders.group = function (form) {
    var body = formJson(form);
    body.users = checkedValues(form, "[data-member]").map(function (id) { return { user: { id: Number(id) } }; });
    return body;
  };

  builders.segment = function (form) {
    var body = formJson(form);
    body.constraints = constraintsOf(form);
    return body;
  };

  function showStrategyFields(form) {
    var select = form.querySelector("[data-strategy-select]");
    if (!select) return;
    var fieldsets = form.querySelectorAll("fieldset[data-for]");
    for (var i = 0; i < fieldsets.length; i++) {
      fieldsets[i].hidden = fieldsets[i].getAttribute("data-for").split(" ").indexOf(select.value) < 0;
      var hides = fieldsets[i].querySelectorAll("[data-hide-for]");
      for (var j = 0; j < hides.length; j++) hides[j].hidden = hides[j].getAttribute("data-hide-for") === select.value;
    }
  }

  function showOperatorFields(row) {
    var single = singleValueOperators().indexOf(row.querySelector('[data-c="operator"]').value) >= 0;
    row.querySelector("[data-one]").hidden = !single;
    row.querySelector("[data-many]").hidden = single;
  }

  function prepare(root) {
    var forms = root.querySelectorAll ? root.querySelectorAll(".strategy-form") : [];
    for (var i = 0; i < forms.length; i++) showStrategyFields(forms[i]);
    var rows = root.querySelectorAll ? root.querySelectorAll(".constraint-row") : [];
    for (var j = 0; j < rows.length; j++) showOperatorFields(rows[j]);
  }

  document.addEventListener("DOMContentLoaded", function () { prepare(document); });
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.matches("[data-strategy-select]")) showStrategyFields(target.closest("form"));
    if (target.matches('[data-c="operator"]')) showOperatorFields(target.closest(".constraint-row"));
    if (target.matches("[data-role-type]")) {
      var sets = target.closest("form").querySelectorAll("fieldset[data-for-role]");
      for (var i = 0; i < sets.length; i++) sets[i].hidden = sets[i].getAttribute("data-for-role") !== target.value;
    }
  });
  document.addEventListener("click", function (event) {
    var target = event.target;
    if (target.matches("[data-add-constraint]")) {
      var template = document.getElementById("constraint-row-template");
      var row = template.content.firstElementChild.cloneNode(true);
      target.closest("form").querySelector("[data-constraints]").appendChild(row);
      showOperatorFields(row);
    } else if (target.matches("[data-add-variant]")) {
      var rows = target.previousElementSibling;
      var kind = rows.getAttribute("data-overrides") === "yes" ? "variant-row-overrides-template" : "variant-row-template";
      rows.appendChild(document.getElementById(kind).content.firstElementChild.cloneNode(true));
    } else if (target.matches("[data-remove-row]")) {
      target.closest(".constraint-row, .variant-row").remove();
    }
  });

  htmx.defineExtension("json-form", {
    onEvent: function (name, event) {
      if (name !== "htmx:configRequest") return true;
      var elt = event.detail.elt;
      var form = formOf(elt);
      try {
        var builder = builders[form.getAttribute("data-builder")];
        if (elt.hasAttribute("data-body")) {
          // A button whose whole body the server rendered (a strategy's new order).
          form._flagproxyJson = JSON.stringify(JSON.parse(elt.getAttribute("data-body")));
        } else {
          form._flagproxyJson = JSON.stringify(builder ? builder(form) : formJson(form));
        }
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
    if (xhr.status === 401 && !elt.closest("[data-signin]")) {
      // The session ended (signed out elsewhere, expired, the user deleted): sign in again, then come back.
      window.location.assign("/console/login?next=" + encodeURIComponent(window.location.pathname));
      return;
    }
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
