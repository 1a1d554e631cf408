"""Building the Unleash context from a query string or a POST body."""

from __future__ import annotations

import pytest

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
