"""The validation cache on its own, with a fake upstream client: batching per loop turn, single flight,
bounded refusals, the backup's hashes; and with the real upstream client against a real `flagproxy server`,
whose `/edge/validate` says what each token is."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import orjson

from flagproxy.edge import validation
from flagproxy.edge.tokens import RESTORED, VALIDATED
from flagproxy.edge.validation import TokenValidator, UpstreamUnavailable
from flagproxy.http.logger import make_logger
from flagproxy.sync.upstream import UpstreamClient, UpstreamConfig
from tests.server.harness import ADMIN_TOKEN, Api, ServerProcess, unique

VALID = "*:development.valid-secret"


class FakeClient:
    def __init__(self, status: int = 200) -> None:
        self.calls: list[list[str]] = []
        self.status = status

    async def exchange(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        assert path == "edge/validate"
        self.calls.append(list(body["tokens"]))
        await asyncio.sleep(0.01)
        listed = [{"token": VALID, "type": "frontend", "environment": "development", "projects": ["*"]}]
        return self.status, orjson.dumps({"tokens": [t for t in listed if t["token"] in body["tokens"]]})


def validator(client: FakeClient) -> TokenValidator:
    return TokenValidator(client, make_logger(None, "fatal", False))


def test_new_tokens_of_one_loop_turn_go_in_one_call_each_once() -> None:
    client = FakeClient()
    cache = validator(client)
    tokens = [f"*:development.random-{i}" for i in range(100)] + [VALID]

    async def storm() -> list[Any]:
        return await asyncio.gather(*(cache.validate(t) for t in tokens + tokens))

    answers = asyncio.run(storm())
    assert client.calls == [tokens]  # one call, every token once, though each was asked for twice
    assert [a is not None for a in answers].count(True) == 2
    assert asyncio.run(storm()) == answers and len(client.calls) == 1  # all cached, refusals too


def test_unavailable_is_raised_and_nothing_is_remembered() -> None:
    client = FakeClient(status=503)
    cache = validator(client)

    async def ask() -> Any:
        try:
            return await cache.validate(VALID)
        except UpstreamUnavailable:
            return "unavailable"

    assert asyncio.run(ask()) == "unavailable"
    client.status = 200
    assert asyncio.run(ask()).status == VALIDATED


def test_refusals_are_bounded(monkeypatch: Any) -> None:
    monkeypatch.setattr(validation, "MAX_INVALID", 10)
    cache = validator(FakeClient())

    async def refuse() -> None:
        await asyncio.gather(*(cache.validate(f"*:development.r{i}") for i in range(25)))

    asyncio.run(refuse())
    assert len(cache.invalid) == 10


def test_the_backup_keeps_hashes_and_a_restored_token_learns_its_secret() -> None:
    cache = validator(FakeClient())
    asyncio.run(cache.validate(VALID))
    saved = cache.saved()
    assert VALID not in orjson.dumps(saved).decode()
    assert saved[0]["key"] == hashlib.sha256(VALID.encode()).hexdigest()  # docs/edge.md: the secret's SHA-256
    restarted = validator(FakeClient())
    assert restarted.restore(saved) == 1
    assert next(iter(restarted.known.values())).status == RESTORED
    _, token, _ = restarted.cached(VALID)
    assert token is not None and token.status == VALIDATED and token.secret == VALID
    assert restarted.restore([{"key": "zz"}, "junk"]) == 0


def _made(api: Api, kind: str, environment: str, projects: list[str]) -> str:
    body = {"tokenName": unique("v"), "type": kind, "environment": environment, "projects": projects}
    answer = api.post("/api/admin/api-tokens", body)
    assert answer.status == 201, answer.body
    return str(answer.json()["secret"])


def test_a_real_server_says_what_each_token_is(upstream_server: ServerProcess, admin: Api) -> None:
    client_token = _made(admin, "client", "production", ["*"])
    frontend_token = _made(admin, "frontend", "development", ["default", "other"])
    revoked = _made(admin, "client", "development", ["default"])
    assert admin.delete(f"/api/admin/api-tokens/{revoked}").status == 200
    made_up = [f"*:development.{unique('made-up')}" for _ in range(50)]
    asked = [client_token, frontend_token, revoked, ADMIN_TOKEN, *made_up]

    async def validate_all() -> list[Any]:
        client = UpstreamClient(
            UpstreamConfig(url=upstream_server.url, token="", app_name="t", instance_id="i")
        )
        cache = TokenValidator(client, make_logger(None, "fatal", False))
        try:
            answers = await asyncio.gather(*(cache.validate(t) for t in asked))
            return [answers, cache.upstream_calls]
        finally:
            await client.close()

    answers, calls = asyncio.run(validate_all())
    assert calls == 1  # one /edge/validate call for the whole loop turn
    described = [None if a is None else (a.type, a.environment, a.projects, a.status) for a in answers]
    assert described[:2] == [
        ("client", "production", ("*",), VALIDATED),
        ("frontend", "development", ("default", "other"), VALIDATED),
    ]
    assert described[2:] == [None] * (2 + len(made_up))  # revoked, admin and unknown tokens are refused
