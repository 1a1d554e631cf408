"""The OpenAPI document and the interactive page, which must work offline (no CDN)."""

from __future__ import annotations

import re

from tests.server.harness import Api


def test_openapi_document_lists_the_routes(api: Api) -> None:
    answer = api.get("/docs/openapi.json", token=None)
    assert answer.status == 200
    document = answer.json()
    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    for path in (
        "/api/admin/projects/{project_id}/features",
        "/api/admin/environments/{name}/on",
        "/api/admin/segments/{segment_id}",
        "/api/admin/api-tokens",
        "/api/client/features",
        "/api/client/metrics",
    ):
        assert path in paths, path
    body = paths["/api/admin/segments"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]
    assert {"get", "put", "delete"} <= set(paths["/api/admin/projects/{project_id}"])
    assert paths["/api/admin/projects/{project_id}"]["put"]["requestBody"]["content"]["application/json"]
    search = paths["/api/admin/search/events"]["get"]
    assert {p["name"] for p in search["parameters"]} >= {"limit", "offset"}


def test_interactive_page_loads_nothing_from_elsewhere(api: Api) -> None:
    for path in ("/docs/openapi", "/docs"):
        answer = api.get(path, token=None)
        assert answer.status == 200 and answer.headers["content-type"].startswith("text/html")
        page = answer.body.decode()
        assert "/docs/openapi.json" in page
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
        assert "cdn" not in page.lower()
