"""The playground page: pick an environment and projects, enter a context (fields or JSON), and see every
flag's answer and variant with its reasons. The results come from `playground()` of
flagproxy/server/routes/playground.py, the function behind `POST /api/admin/playground?explain=true`;
the page asks for them with a GET (evaluating changes nothing), so no CSRF token is involved."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError
from sanic import Blueprint, HTTPResponse, Request

from flagproxy.server.console.render import html, signed_in
from flagproxy.server.errors import ValidationFailed
from flagproxy.server.routes.playground import PlaygroundBody, playground
from flagproxy.server.storage import projects as project_rows

bp = Blueprint("console_playground")
STANDARD_FIELDS = ("userId", "sessionId", "remoteAddress", "appName", "currentTime")


@bp.get("/console/playground")
@signed_in
async def page(request: Request) -> HTTPResponse:
    with request.app.ctx.db.transaction(read_only=True) as tx:
        environments = project_rows.environments(tx)
        projects = project_rows.projects(tx)
    return await html(
        request, "playground.html", environments=environments, projects=projects, fields=STANDARD_FIELDS
    )


def _context(request: Request) -> dict[str, Any]:
    """The JSON box, with the single fields on top of it (a field left empty is not sent)."""
    text = (request.args.get("context") or "").strip()
    context: Any = {}
    if text:
        try:
            context = orjson.loads(text)
        except orjson.JSONDecodeError as problem:
            raise ValidationFailed("context", f"is not valid JSON: {problem}") from None
        if not isinstance(context, dict):
            raise ValidationFailed("context", "must be a JSON object")
    for name in STANDARD_FIELDS:
        value = (request.args.get(name) or "").strip()
        if value:
            context[name] = value
    return context


@bp.get("/console/playground/results")
@signed_in
async def results(request: Request) -> HTTPResponse:
    chosen = request.args.getlist("projects") or ["*"]
    try:
        body = PlaygroundBody(
            environment=request.args.get("environment", ""), projects=chosen, context=_context(request)
        )
    except ValidationError as problem:
        error = problem.errors()[0]
        raise ValidationFailed(".".join(str(p) for p in error["loc"]), error["msg"]) from None
    with request.app.ctx.db.transaction(read_only=True) as tx:
        answer = playground(tx, body, with_reasons=True)
    return await html(request, "playground_results.html", answer=answer)
