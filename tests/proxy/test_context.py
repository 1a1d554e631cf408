"""Building the Unleash context from a query string or a POST body."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flagproxy.http.context import body_context, normalise_time, parse_toggles, query_context
from flagproxy.http.errors import ClientError


def test_query_context_sorts_fields_into_root_and_properties():
    assert query_context(
        "appName=a&userId=u&properties[region]=eu&tenant=t&region=loses&currentTime=2024-01-02"
    ) == {
        "appName": "a",
        "userId": "u",
        "currentTime": "2024-01-02T00:00:00.000Z",
        "properties": {"tenant": "t", "region": "eu"},
    }


def test_query_context_empty_and_odd_keys():
    assert query_context("") == {"properties": {}}
    assert query_context("&&=x&a") == {"properties": {"a": ""}}
    assert query_context("weird[=1&x]=2") == {"properties": {"weird[": "1", "x]": "2"}}


@pytest.mark.parametrize(
    "query",
    [
        "userId=a&userId=b",
        "properties=x",
        "properties[a]=1&properties[a]=2",
        "properties[a][b]=c",
        "x[y]=z",
        "currentTime=a&currentTime=b",
    ],
)
def test_query_context_rejects_non_strings(query):
    with pytest.raises(ClientError) as raised:
        query_context(query)
    assert raised.value.status == 400


def test_body_context_coerces_like_the_node_proxy():
    assert body_context(
        {"context": {"userId": 7, "sessionId": None, "properties": {"b": True, "n": 2.0}}}
    ) == {
        "userId": "7",
        "properties": {"b": "true", "n": "2"},
    }
    assert body_context({}) == {"properties": {}}
    assert body_context({"context": {"currentTime": 5}}) == {"properties": {}}


@pytest.mark.parametrize(
    "context", ["x", None, [], {"properties": []}, {"userId": {}}, {"properties": {"a": [1]}}]
)
def test_body_context_rejects(context):
    with pytest.raises(ClientError):
        body_context({"context": context})


def test_parse_toggles():
    assert parse_toggles({}) is None
    assert parse_toggles({"toggles": []}) is None
    assert parse_toggles({"toggles": ["a", 1, True]}) == ["a", "1", "true"]
    for bad in ("a", {"a": 1}, [None, {}]):
        with pytest.raises(ClientError):
            parse_toggles({"toggles": bad})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-05-06T07:08:09Z", "2024-05-06T07:08:09.000Z"),
        ("2024-05-06T09:08:09+02:00", "2024-05-06T07:08:09.000Z"),
        ("garbage", None),
        ("0001-01-01T00:00:00+01:00", None),  # before year 1 in UTC: dropped, not a 500
        ("9999-12-31T23:59:59-01:00", None),
        ("", None),
    ],
)
def test_normalise_time(value, expected):
    assert normalise_time(value) == expected


# JSON number texts whose JavaScript string differs from Python's str/repr: exponents from 1e21 up and
# below 1e-6, 0.000001 written out, integers past 2**53 read as doubles, and -0.
NUMBER_TEXTS = [
    "1e21", "1e22", "1.5e300", "1.7976931348623157e308", "123456789012345680000", "0.000001", "0.0000001",
    "1e-7", "-1e-7", "5e-324", "2.5e-10", "9007199254740993", "-9007199254740993", "1e3", "1E3", "-0",
    "-0.0", "1.0", "0.1", "100", "42", "-5", "1.25", "123.456", "1e20", "99999999999999990000",
]  # fmt: skip


def _as_javascript_writes(texts: list[str]) -> dict[str, str]:
    """String(JSON.parse(text)) for each text, from node itself (tests/sdk's node)."""
    assert shutil.which("node"), "node is missing: .ci/run installs it"
    script = "for (const t of JSON.parse(process.argv[1])) console.log(String(JSON.parse(t)))"
    run = subprocess.run(
        ["node", "-e", script, json.dumps(texts)], capture_output=True, text=True, check=True
    )
    return dict(zip(texts, run.stdout.splitlines(), strict=True))


def _as_context_writes(texts: list[str]) -> dict[str, str]:
    return {
        text: body_context({"context": {"properties": {"n": json.loads(text)}}})["properties"]["n"]
        for text in texts
    }


def test_numbers_are_written_as_javascript_writes_them():
    """The Node proxy's validation (ajv's coerceTypes) writes a number in the context as JavaScript's
    String(number) does."""
    assert _as_context_writes(NUMBER_TEXTS) == _as_javascript_writes(NUMBER_TEXTS)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**63), 2**63), min_size=40))
def test_any_number_is_written_as_javascript_writes_it(numbers: list[float | int]) -> None:
    texts = [json.dumps(n) for n in numbers]
    assert _as_context_writes(texts) == _as_javascript_writes(texts)
