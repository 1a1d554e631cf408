"""Projects (and a project's settings: rename, delete), a project's flags (a table with an on/off switch
per environment, search by name and tag, create, archive), the archive (revive) and the environments
(create, switch on and off).

The table is also a fragment (`.../flags/table`) that htmx swaps in when the search changes or after a
switch moved, so the page never reloads for either."""

from __future__ import annotations

from typing import Any, get_args

from sanic import Blueprint, HTTPResponse, Request

from flagproxy.server.console.render import html, signed_in
from flagproxy.server.routes.common import require_project, tag_filter
from flagproxy.server.schemas import CreateFeatureBody
from flagproxy.server.shapes import environment_json, feature_json, project_feature_list, project_json
from flagproxy.server.storage import catalog as catalog_rows
from flagproxy.server.storage import projects as project_rows

bp = Blueprint("console_flags")
# The flag types the create form offers: exactly those the admin API's body accepts.
FEATURE_TYPES = get_args(CreateFeatureBody.model_fields["type"].annotation)


@bp.get("/console/projects")
@signed_in
async def projects(request: Request) -> HTTPResponse:
    with request.app.ctx.db.transaction(read_only=True) as tx:
        rows = [project_json(row) for row in project_rows.projects(tx)]
        catalog = catalog_rows.load(tx)
    counts: dict[str, int] = {}
    for feature in catalog.features:
        counts[feature["project"]] = counts.get(feature["project"], 0) + 1
    return await html(request, "projects.html", projects=rows, counts=counts)


def _table_context(request: Request, project_id: str) -> dict[str, Any]:
    """The flags of the table, filtered as the search form says (the name anywhere, any case)."""
    wanted = (request.args.get("q") or "").strip().lower()
    if request.args.get("tag"):
        tags = tag_filter(request)  # "tag=<type>:<value>", as the admin API's filter; a bad one is a 400
    else:
        tags = ()
    with request.app.ctx.db.transaction(read_only=True) as tx:
        project = require_project(tx, project_id)
        catalog = catalog_rows.load(tx)
    flags = project_feature_list(catalog, project_id, lambda name: wanted in name.lower(), tags)
    all_tags = sorted(
        {
            (t["type"], t["value"])
            for f in catalog.features
            if f["project"] == project_id
            for t in catalog.tags.get(f["name"], [])
        }
    )
    return {
        "project": project_json(project),
        "flags": flags,
        "environments": catalog.environments,
        "all_tags": all_tags,
        "q": request.args.get("q") or "",
        "tag": request.args.get("tag") or "",
    }


@bp.get("/console/projects/<project_id>")
@signed_in
async def project(request: Request, project_id: str) -> HTTPResponse:
    return await html(request, "project.html", types=FEATURE_TYPES, **_table_context(request, project_id))


@bp.get("/console/projects/<project_id>/flags/table")
@signed_in
async def flag_table(request: Request, project_id: str) -> HTTPResponse:
    return await html(request, "flag_table.html", **_table_context(request, project_id))


@bp.get("/console/projects/<project_id>/settings")
@signed_in
async def project_settings(request: Request, project_id: str) -> HTTPResponse:
    """Rename the project or change its description; delete it (refused by the API while it holds flags
    that are not archived, and for the default project)."""
    with request.app.ctx.db.transaction(read_only=True) as tx:
        project = project_json(require_project(tx, project_id))
        active = project_rows.feature_names(tx, project_id, archived=False)
        archived = project_rows.feature_names(tx, project_id, archived=True)
    return await html(request, "project_settings.html", project=project, active=active, archived=archived)


@bp.get("/console/archive")
@signed_in
async def archive(request: Request) -> HTTPResponse:
    with request.app.ctx.db.transaction(read_only=True) as tx:
        catalog = catalog_rows.load(tx, include_archived=True)
    flags = [feature_json(catalog, f) for f in catalog.features if f["archived"]]
    return await html(request, "archive.html", flags=flags)


@bp.get("/console/environments")
@signed_in
async def environments(request: Request) -> HTTPResponse:
    with request.app.ctx.db.transaction(read_only=True) as tx:
        shown = [environment_json(row) for row in project_rows.environments(tx)]
    return await html(request, "environments.html", environments=shown)
