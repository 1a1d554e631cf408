"""The playground: `POST /api/admin/playground`, Unleash's request and response shapes.

It evaluates the client API payload an SDK of that environment and those projects would get (built by
flagproxy/server/client_features.py, the same bytes' source) with the engine's compiler and the pure
evaluator's functions (flagproxy/explain.py). `?explain=true` adds flagproxy's reasons to Unleash's shape:
each constraint's `contextValue`, each strategy's `condition` (rollout bucket against percentage, seed,
group), the feature's `reason`, `decidedBy` and `dependencies`.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, Field, StrictStr
from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.explain import explain
from flagproxy.server import client_features
from flagproxy.server.errors import ValidationFailed
from flagproxy.server.routes.common import json_response, require_environment
from flagproxy.server.storage import catalog as catalog_rows
from flagproxy.server.storage import projects as project_rows
from flagproxy.server.storage import revision
from flagproxy.server.validation import json_body, request_context

bp = Blueprint("playground")


class PlaygroundBody(BaseModel):
    environment: StrictStr
    projects: list[StrictStr] | StrictStr = "*"
    context: dict[str, Any] = Field(default_factory=dict)


def _projects(tx: Any, projects: list[str] | str) -> tuple[str, ...] | None:
    if isinstance(projects, str):
        if projects != "*":
            raise ValidationFailed("projects", 'must be a list of project ids or "*"')
        return None
    if "*" in projects:
        return None
    for index, project in enumerate(projects):
        if project_rows.project(tx, project) is None:
            raise ValidationFailed(f"projects[{index}]", f"there is no project {project!r}")
    return tuple(projects)


def _context(raw: dict[str, Any], environment: str) -> dict[str, Any]:
    """The context as the frontend API, the proxy and edge read it (one parser), in the environment
    asked about unless the context names one."""
    return {"appName": "playground", "environment": environment, **request_context(body={"context": raw})}


def _plain(constraint: dict[str, Any]) -> dict[str, Any]:
    """Unleash's playgroundConstraintSchema: the constraint and its result, nothing more."""
    return {k: v for k, v in constraint.items() if k != "contextValue"}


def _strategy_json(
    explained: dict[str, Any], stored: dict[str, Any], link: str, with_reasons: bool
) -> dict[str, Any]:
    constraints = explained["constraints"]
    segments = explained["segments"]
    if not with_reasons:
        constraints = [_plain(c) for c in constraints]
        segments = [{**s, "constraints": [_plain(c) for c in s["constraints"]]} for s in segments]
    shown: dict[str, Any] = {
        "name": explained["name"],
        "id": stored["id"],
        "title": stored["title"] or "",
        "disabled": False,
        "parameters": explained["parameters"],
        "constraints": constraints,
        "segments": segments,
        "result": {"enabled": explained["enabled"], "evaluationStatus": "complete"},
        "links": {"edit": f"{link}?environmentId={stored['environment']}&strategyId={stored['id']}"},
    }
    if with_reasons:
        shown["condition"] = explained["condition"]
    return shown


def _disabled_json(stored: dict[str, Any], link: str) -> dict[str, Any]:
    """A disabled strategy, listed in its place as Unleash lists it: never evaluated (SDKs never see it)."""
    return {
        "name": stored["name"],
        "id": stored["id"],
        "title": stored["title"] or "",
        "disabled": True,
        "parameters": stored["parameters"],
        "constraints": [{**c, "result": False} for c in stored["constraints"]],
        "segments": [],
        "result": {"enabled": "unknown", "evaluationStatus": "unevaluated"},
        "links": {"edit": f"{link}?environmentId={stored['environment']}&strategyId={stored['id']}"},
    }


def playground(tx: Any, body: PlaygroundBody, with_reasons: bool) -> dict[str, Any]:
    """The playground's answer; the console's page renders the same dict."""
    require_environment(tx, body.environment)
    projects = _projects(tx, body.projects)
    context = _context(body.context, body.environment)
    catalog = catalog_rows.load(tx)
    query = client_features.ClientQuery(projects=projects, environment=body.environment)
    payload = orjson.loads(client_features.build(catalog, query, revision.current(tx)).body)
    project_of = {f["name"]: f["project"] for f in catalog.features}
    features = []
    for answer in explain(payload, context):
        name = answer["name"]
        every = catalog.strategies.get((name, body.environment), [])
        stored = [s for s in every if not s["disabled"]]
        link = f"/projects/{project_of[name]}/features/{name}/strategies/edit"
        pairs = zip(answer["strategies"], stored, strict=True)
        evaluated = {s["id"]: _strategy_json(e, s, link, with_reasons) for e, s in pairs}
        strategies = [evaluated.get(s["id"]) or _disabled_json(s, link) for s in every]
        state = catalog.feature_environments.get((name, body.environment))
        item: dict[str, Any] = {
            "name": name,
            "projectId": project_of[name],
            "isEnabled": answer["isEnabled"],
            "isEnabledInCurrentEnvironment": answer["enabled"],
            "hasUnsatisfiedDependency": not all(d["result"] for d in answer["dependencies"]),
            "strategies": {
                "result": any(s["result"]["enabled"] is True for s in strategies),
                "data": strategies,
            },
            "variant": answer["variant"],
            "variants": state["variants"] if state else [],
        }
        if with_reasons:
            decided, reason = answer["decidedBy"], answer["reason"]
            if decided is not None:
                # explain counts the strategies SDKs see; the list here has the disabled ones in place too.
                decided = every.index(stored[decided])
                reason = f"strategy {decided + 1} ({every[decided]['name']}) matched"
            item.update(reason=reason, decidedBy=decided, dependencies=answer["dependencies"])
        features.append(item)
    request_echo = {"environment": body.environment, "projects": body.projects, "context": context}
    return {"input": request_echo, "features": features}


@bp.post("/api/admin/playground")
@openapi.summary("Evaluate every flag of an environment and projects for a context, with the reasons")
@openapi.tag("Playground")
@json_body(PlaygroundBody, stored=False)
async def evaluate(request: Request, body: PlaygroundBody) -> HTTPResponse:
    with_reasons = request.args.get("explain", "").lower() in ("1", "true")
    with request.app.ctx.db.transaction(read_only=True) as tx:  # a POST that only reads
        return json_response(playground(tx, body, with_reasons))
