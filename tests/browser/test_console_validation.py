"""Unit tests of the console's form handling (static/console.js) in Chromium: the strategy form's inline
validation (every operator the API takes is offered, refused empty or with a value of the wrong kind, and
accepted by the API when right; every kind of constraint mistake, rollouts, variants and their JSON
payloads), the JSON it builds when the form is right, and the typed fields of plain forms; and the CSRF
header htmx sends."""

from __future__ import annotations

import pytest

from tests.server.harness import unique

pytestmark = pytest.mark.slow

# Fill the add-strategy form of the development section as a case says, then run the builder.
BUILD = """(fill) => {
    const section = document.querySelector("section.environment[data-env=development]");
    const form = section.querySelector("details.add-strategy form");
    form.querySelector("[data-constraints]").innerHTML = "";
    form.querySelector("[name=name]").value = fill.strategy || "flexibleRollout";
    form.querySelector("[name=name]").dispatchEvent(new Event("change", {bubbles: true}));
    form.querySelector("[data-param=rollout]").value = fill.rollout || "30";
    for (const [key, value] of Object.entries(fill.params || {})) {
        form.querySelector(`fieldset:not([hidden]) [data-param=${key}]`).value = value;
    }
    form.querySelector("[data-variant-rows]").innerHTML = "";
    for (const v of fill.variants || []) {
        form.querySelector("[data-add-variant]").click();
        const row = form.querySelector("[data-variant-rows] > .variant-row:last-child");
        for (const [key, value] of Object.entries(v)) row.querySelector(`[data-v="${key}"]`).value = value;
    }
    for (const c of fill.constraints || []) {
        form.querySelector("[data-add-constraint]").click();
        const row = form.querySelector(".constraint-row:last-child");
        row.querySelector('[data-c="contextName"]').value = c.contextName || "";
        const operator = row.querySelector('[data-c="operator"]');
        operator.value = c.operator || "IN";
        operator.dispatchEvent(new Event("change", {bubbles: true}));
        row.querySelector('[data-c="values"]').value = c.values || "";
        row.querySelector('[data-c="value"]').value = c.value || "";
        row.querySelector('[data-c="caseInsensitive"]').checked = !!c.caseInsensitive;
        row.querySelector('[data-c="inverted"]').checked = !!c.inverted;
    }
    try {
        return {body: window.flagproxyConsole.builders.strategy(form)};
    } catch (problem) {
        const marked = form.querySelectorAll(".constraint-row.invalid, .variant-row.invalid");
        return {error: problem.message, marked: marked.length};
    }
}"""

MISTAKES = [
    ({"constraints": [{"values": "a"}]}, "Constraint 1: choose a context field"),
    ({"constraints": [{"contextName": "country"}]}, "Constraint 1: IN needs at least one value"),
    (
        {
            "constraints": [
                {"contextName": "a", "values": "x"},
                {"contextName": "age", "operator": "NUM_GT", "value": "old"},
            ]
        },
        "Constraint 2: the value must be a number",
    ),
    ({"constraints": [{"contextName": "age", "operator": "NUM_EQ"}]}, "Constraint 1: NUM_EQ needs a value"),
    (
        {"constraints": [{"contextName": "currentTime", "operator": "DATE_AFTER", "value": "yesterday"}]},
        "Constraint 1: the value must be a date like 2026-01-31T12:00:00Z",
    ),
    (
        {"constraints": [{"contextName": "version", "operator": "SEMVER_GTE", "value": "1.2"}]},
        "Constraint 1: the value must be a semantic version like 1.2.3",
    ),
    ({"rollout": "101"}, "rollout must be a whole number from 0 to 100"),
    ({"rollout": "3.5"}, "rollout must be a whole number from 0 to 100"),
    ({"variants": [{"weightType": "variable"}]}, "Variant 1: needs a name"),
    ({"variants": [{"name": "a"}, {"name": "a"}]}, "Variant 2: the name a is used twice"),
    (
        {"variants": [{"name": "a", "weightType": "fix", "weight": "120"}]},
        "Variant 1: a fixed weight is a percentage from 0 to 100",
    ),
    (
        {"variants": [{"name": "a", "payloadType": "json", "payloadValue": "{x"}]},
        "Variant 1: the JSON payload is not valid JSON",
    ),
    (
        {"variants": [{"name": "a", "payloadType": "number", "payloadValue": "ten"}]},
        "Variant 1: the number payload is not a number",
    ),
]


@pytest.fixture(scope="module")
def flag_page(console, browser):
    name = unique("validated")
    console.api.create_feature(name)
    page, errors = browser.page()
    console.sign_in(page, console.admin_email, start=f"/console/projects/default/features/{name}")
    yield page, name
    assert errors == []


@pytest.mark.parametrize(("fill", "message"), MISTAKES)
def test_the_strategy_form_refuses_mistakes_before_sending(flag_page, fill, message):
    page, _ = flag_page
    result = page.evaluate(BUILD, fill)
    assert result.get("error", "").startswith(message), result
    if message.startswith(("Constraint", "Variant")):
        assert result["marked"] == 1  # the row at fault is marked, and only it


def test_a_regex_that_does_not_compile_is_refused(flag_page):
    page, _ = flag_page
    fill = {"constraints": [{"contextName": "email", "operator": "REGEX", "value": "(unclosed"}]}
    assert page.evaluate(BUILD, fill)["error"].startswith("Constraint 1: the pattern is not valid")


# Every constraint operator and whether it takes one `value` or a list of `values`, written down here from
# Unleash (src/lib/util/constants.ts: singleValueOperators are the NUM_, DATE_ and SEMVER_ ones,
# multipleValueOperators IN, NOT_IN and the STR_ ones) and flagproxy's four more (docs/server.md: SEMVER_GTE
# and SEMVER_LTE, REGEX take one value, IN_CIDR a list), not read from the server, so that a wrong entry there
# (the console asking for a list where the API wants one value) fails here.
SINGLE = ["NUM_EQ", "NUM_GT", "NUM_GTE", "NUM_LT", "NUM_LTE", "DATE_AFTER", "DATE_BEFORE"]
SINGLE += ["SEMVER_EQ", "SEMVER_GT", "SEMVER_LT", "SEMVER_GTE", "SEMVER_LTE", "REGEX"]
MULTIPLE = ["IN", "NOT_IN", "STR_ENDS_WITH", "STR_STARTS_WITH", "STR_CONTAINS", "IN_CIDR"]
OPERATORS = SINGLE + MULTIPLE
OPTIONS = """() => Array.from(document.querySelector("#constraint-row-template").content
    .querySelectorAll("[data-c=operator] option")).map((option) => option.value)"""
GOOD = {
    "NUM": "18",
    "DATE": "2026-01-31T12:00:00Z",
    "SEMVER": "1.2.3",
    "REGEX": "^a.*",
    "CIDR": "10.0.0.0/8, ::1",
}
BAD = {
    "NUM": ("eighteen", "the value must be a number"),
    "DATE": ("2026-01-31", "the value must be a date like"),
    "SEMVER": ("1.2", "the value must be a semantic version"),
    "REGEX": ("(a", "the pattern is not valid"),
    "CIDR": ("10.0.0.0/8, banana", "banana is not an IP address or CIDR range"),
}


def test_the_editor_offers_exactly_these_operators(flag_page):
    page, _ = flag_page
    assert sorted(page.evaluate(OPTIONS)) == sorted(OPERATORS)


@pytest.mark.parametrize("operator", OPERATORS)
def test_every_operator_the_api_takes_is_offered_checked_and_accepted(console, flag_page, operator):
    """Each operator of the API's list is in the editor; left empty or given a value of the wrong kind it
    is refused in the page with its row marked; a right value becomes a body the API takes."""
    page, name = flag_page
    assert operator in page.evaluate(OPTIONS)
    single = operator in SINGLE
    family = "CIDR" if operator == "IN_CIDR" else operator.split("_")[0]
    key = "value" if single else "values"

    empty = page.evaluate(BUILD, {"constraints": [{"contextName": "f", "operator": operator}]})
    needs = "a value" if single else "at least one value"
    assert empty == {"error": f"Constraint 1: {operator} needs {needs}", "marked": 1}
    if family in BAD:
        wrong, message = BAD[family]
        refused = page.evaluate(
            BUILD, {"constraints": [{"contextName": "f", "operator": operator, key: wrong}]}
        )
        assert refused["error"].startswith(f"Constraint 1: {message}") and refused["marked"] == 1, refused

    right = GOOD.get(family, "a, B")
    fill = {"constraints": [{"contextName": "f", "operator": operator, key: right, "inverted": True}]}
    body = page.evaluate(BUILD, fill)["body"]
    constraint = body["constraints"][0]
    assert constraint["operator"] == operator and constraint["inverted"] is True
    if single:
        assert constraint["value"] == right
    else:
        assert constraint["values"] == [v.strip() for v in right.split(",")]
    path = f"/api/admin/projects/default/features/{name}/environments/development/strategies"
    answer = console.api.post(path, body)
    assert answer.status == 200, answer.body
    assert answer.json()["constraints"][0]["operator"] == operator


def test_a_right_form_becomes_the_apis_body(flag_page):
    page, name = flag_page
    fill = {
        "rollout": "30",
        "constraints": [
            {"contextName": "country", "values": "NO, SE\nDK", "caseInsensitive": True, "inverted": True},
            {"contextName": "age", "operator": "NUM_GTE", "value": "18"},
        ],
        "variants": [
            {"name": "blue", "payloadType": "json", "payloadValue": '{"a": 1}'},
            {"name": "green", "weightType": "fix", "weight": "12.5", "stickiness": "userId"},
        ],
    }
    body = page.evaluate(BUILD, fill)["body"]
    assert body == {
        "name": "flexibleRollout",
        "parameters": {"rollout": "30", "stickiness": "default", "groupId": name},
        "constraints": [
            {"contextName": "country", "operator": "IN", "caseInsensitive": True, "inverted": True,
             "values": ["NO", "SE", "DK"]},
            {"contextName": "age", "operator": "NUM_GTE", "caseInsensitive": False, "inverted": False,
             "value": "18", "values": []},
        ],
        "segments": [],
        "disabled": False,
        "variants": [
            {"name": "blue", "weightType": "variable", "stickiness": "default", "weight": 0,
             "payload": {"type": "json", "value": '{"a": 1}'}},
            {"name": "green", "weightType": "fix", "stickiness": "userId", "weight": 125},
        ],
    }  # fmt: skip
    user_ids = page.evaluate(BUILD, {"strategy": "userWithId", "params": {"userIds": "a,\n b"}})["body"]
    assert user_ids["parameters"] == {"userIds": "a,b"}  # only the chosen strategy's parameters


def test_plain_forms_send_typed_json(flag_page):
    page, _ = flag_page
    built = page.evaluate(
        """() => {
        const form = document.createElement("form");
        form.innerHTML = `<input name="name" value="n"><input name="skip" value="">
          <input name="weight:number" value="12"><input type="checkbox" name="on:bool" checked>
          <input type="checkbox" name="off:bool"><textarea name="values:list">a, b
c</textarea>
          <textarea name="payload:json">{"x": [1]}</textarea><input name="payload2.type" value="json">
          <input name="projects:array" value="p1"><input name="projects:array" value="p2">
          <select name="ids:numbers"><option value="3" selected>3</option></select>
          <select name="none:numbers"><option value="" selected>-</option></select>`;
        return window.flagproxyConsole.formJson(form);
    }"""
    )
    assert built == {
        "name": "n",
        "weight": 12,
        "on": True,
        "off": False,
        "values": ["a", "b", "c"],
        "payload": {"x": [1]},
        "payload2": {"type": "json"},
        "projects": ["p1", "p2"],
        "ids": [3],
        "none": [],
    }
    refused = page.evaluate(
        """() => {
        const form = document.createElement("form");
        form.innerHTML = '<input name="weight:number" value="ten">';
        try { window.flagproxyConsole.formJson(form); return ""; } catch (e) { return e.message; }
    }"""
    )
    assert refused == "weight must be a number"


def test_htmx_requests_carry_the_csrf_cookie_in_the_header(flag_page):
    page, name = flag_page
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "flagproxy_csrf")
    with (
        page.expect_navigation(),  # the form reloads the page once saved
        page.expect_request(lambda r: r.method == "PUT" and r.url.endswith(f"/features/{name}")) as sent,
    ):
        page.click("#flag-settings button[type=submit]")
    assert sent.value.headers["x-csrf-token"] == csrf
    assert sent.value.headers["content-type"] == "application/json"


def test_environment_variants_take_overrides_one_per_line(flag_page):
    page, _ = flag_page
    read = """(overrides) => {
        const form = document.querySelector("section.environment[data-env=development] .variants-form");
        form.querySelector("[data-variant-rows]").innerHTML = "";
        form.querySelector("[data-add-variant]").click();
        const row = form.querySelector(".variant-row");
        row.querySelector('[data-v="name"]').value = "blue";
        row.querySelector('[data-v="overrides"]').value = overrides;
        try { return {body: window.flagproxyConsole.builders.variants(form)}; }
        catch (problem) { return {error: problem.message}; }
    }"""
    body = page.evaluate(read, "userId=ann, bob\n\n region = eu")["body"]
    assert body[0]["overrides"] == [
        {"contextName": "userId", "values": ["ann", "bob"]},
        {"contextName": "region", "values": ["eu"]},
    ]
    assert page.evaluate(read, "userId")["error"] == "Variant 1: an override is field=value1,value2 (line 1)"
