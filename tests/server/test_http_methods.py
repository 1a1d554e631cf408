"""HEAD on every GET route and OPTIONS on every path, as sanic-ext answers them
(flagproxy/server/auto_methods.py adds them before the server starts, not in sanic-ext's listener)."""

from __future__ import annotations

from tests.server.harness import Api


def test_head_answers_what_get_answers_without_the_body(api: Api) -> None:
    paths = (("/health", None), ("/api/admin/projects", ...), ("/api/admin/projects/default", ...))
    for path, token in paths:
        got = api.get(path, token=token)
        head = api.request("HEAD", path, token=token)
        assert got.status == head.status == 200, path
        assert head.body == b"", path
        assert head.headers["content-type"] == got.headers["content-type"], path


def test_head_needs_what_get_needs(api: Api) -> None:
    assert api.request("HEAD", "/api/admin/projects", token=None).status == 401


def test_options_names_the_methods_of_the_path(api: Api) -> None:
    for path, methods in (
        ("/api/admin/projects", {"GET", "HEAD", "POST", "OPTIONS"}),
        ("/api/admin/projects/default", {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"}),
        ("/api/admin/segments", {"GET", "HEAD", "POST", "OPTIONS"}),
    ):
        answer = api.request("OPTIONS", path)
        assert answer.status == 204, (path, answer.status, answer.body)
        assert set(answer.headers["allow"].split(",")) == methods, path


def test_the_added_methods_stay_out_of_the_openapi_document(api: Api) -> None:
    paths = api.get("/docs/openapi.json", token=None).json()["paths"]
    assert {"get", "put", "delete"} <= set(paths["/api/admin/projects/{project_id}"])
    added = [(path, method) for path, ops in paths.items() for method in ops if method in ("head", "options")]
    assert not added
