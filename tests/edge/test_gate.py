"""The token gate's hot path on its own (a real TokenValidator with a fake upstream client, as in
test_validation_cache.py): a header that passed is found again by one lookup of the header as it arrived,
only while the validator still holds the token it passed as, so revocation and revalidation mean what
they meant; what it remembers is bounded. tests/edge/test_tokens.py holds the same contracts over HTTP."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import orjson

from flagproxy.edge import access
from flagproxy.edge.access import FORBIDDEN, Gate
from flagproxy.edge.scopes import ServedScope
from flagproxy.edge.tokens import CLIENT, FRONTEND, token_key
from flagproxy.edge.validation import TokenValidator
from flagproxy.http.logger import make_logger

TOKEN = "*:development.gate-secret"
LOGGER = make_logger(None, "fatal", False)


class Upstream:
    """`/edge/validate` as the upstream answers it: TOKEN is a frontend token while `listed`."""

    def __init__(self) -> None:
        self.listed = True
        self.calls = 0

    async def exchange(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        assert path == "edge/validate"
        self.calls += 1
        entry = {"token": TOKEN, "type": "frontend", "environment": "development", "projects": ["*"]}
        listed = [entry] if self.listed and TOKEN in body["tokens"] else []
        return 200, orjson.dumps({"tokens": listed})


def gate_for(upstream: Upstream) -> tuple[Gate, TokenValidator, ServedScope]:
    validator = TokenValidator(upstream, LOGGER)
    served = ServedScope(("development", ("*",)), ("development", ("*",)), LOGGER)
    edge = SimpleNamespace(
        validator=validator,
        offline=False,
        scopes=SimpleNamespace(serve=lambda token: served),
        settings=SimpleNamespace(dynamic=False),
    )
    return Gate(edge), validator, served


def test_a_passed_header_takes_one_lookup_in_any_form_without_a_full_check() -> None:
    gate, _, served = gate_for(Upstream())
    fast = gate.fast_for(FRONTEND)
    assert fast(TOKEN) is None  # not validated yet: the full check
    assert asyncio.run(gate.check(TOKEN, FRONTEND)) is served
    for header in (TOKEN, f"Bearer {TOKEN}", f"bearer {TOKEN}  ", TOKEN):
        assert fast(header) is served
        assert gate.fast(header, FRONTEND) is served
    assert gate.full_checks == 1
    assert set(gate.remembered[FRONTEND]) == {TOKEN, f"Bearer {TOKEN}", f"bearer {TOKEN}  "}
    assert fast(None) is None and fast("") is None and fast(TOKEN + "x") is None
    assert gate.fast(TOKEN, CLIENT) is None  # a family it did not pass for


def test_a_remembered_header_stops_working_when_revalidation_revokes_its_token() -> None:
    upstream = Upstream()
    gate, validator, served = gate_for(upstream)
    fast = gate.fast_for(FRONTEND)
    assert asyncio.run(gate.check(TOKEN, FRONTEND)) is served
    assert fast(TOKEN) is served
    upstream.listed = False
    assert asyncio.run(validator.revalidate()) == 1
    assert fast(TOKEN) is None and fast(f"Bearer {TOKEN}") is None
    assert asyncio.run(gate.check(TOKEN, FRONTEND)) is FORBIDDEN


def test_a_token_revalidated_again_is_found_by_its_digest_and_remembered_anew() -> None:
    gate, validator, served = gate_for(Upstream())
    fast = gate.fast_for(FRONTEND)
    assert asyncio.run(gate.check(TOKEN, FRONTEND)) is served
    remembered = gate.remembered[FRONTEND][TOKEN]
    assert asyncio.run(validator.revalidate()) == 0  # a new token object for the same secret
    assert validator.known[token_key(TOKEN)] is not remembered[1]
    assert fast(TOKEN) is served
    assert gate.remembered[FRONTEND][TOKEN][1] is validator.known[token_key(TOKEN)]
    assert gate.full_checks == 1


def test_what_the_gate_remembers_is_bounded(monkeypatch: Any) -> None:
    monkeypatch.setattr(access, "REMEMBERED_HEADERS", 10)
    gate, _, served = gate_for(Upstream())
    fast = gate.fast_for(FRONTEND)
    assert asyncio.run(gate.check(TOKEN, FRONTEND)) is served
    padded = [TOKEN + " " * n for n in range(25)]  # one token, as many headers as a caller likes
    assert all(fast(header) is served for header in padded)
    assert list(gate.remembered[FRONTEND]) == padded[-10:]  # the oldest went first
    long = TOKEN + " " * access.LONGEST_REMEMBERED
    assert fast(long) is served and long not in gate.remembered[FRONTEND]
    assert gate.full_checks == 1


def test_a_full_check_that_finds_another_scope_replaces_it_for_every_header() -> None:
    """Two first requests of a token both check in full; should the second find another scope (a feed
    added in between), every form of the header reads what it found, as the digest's entry does."""
    gate, _, served = gate_for(Upstream())
    fast = gate.fast_for(FRONTEND)
    assert asyncio.run(gate.check(f"Bearer {TOKEN}", FRONTEND)) is served
    assert fast(TOKEN) is served
    other = ServedScope(("development", ("*",)), ("development", ("*",)), LOGGER)
    gate.edge.scopes.serve = lambda token: other
    assert asyncio.run(gate.check(f"Bearer {TOKEN}", FRONTEND)) is other
    assert fast(TOKEN) is other and fast(f"Bearer {TOKEN}") is other
