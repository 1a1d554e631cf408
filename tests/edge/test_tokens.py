"""Token validation against a loopback upstream that counts what it is asked: caching (refusals too),
single flight, one upstream call for a storm, revalidation, strict vs dynamic, pretrusted tokens. The
stand-in is here for what only it can do (count and delay the upstream's calls, fail them);
tests/edge/test_server_upstream.py holds the same token contracts against a real `flagproxy server`."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest

from tests.edge.harness import CountingUpstream, EdgeProcess, edge, features_doc

DEV_CLIENT = "*:development.sync-secret"
PROD_CLIENT = "*:production.prod-sync-secret"
DEV_FRONTEND = "*:development.frontend-secret"
PROD_FRONTEND = "*:production.frontend-prod-secret"


@pytest.fixture
def stub(counting: CountingUpstream) -> CountingUpstream:
    counting.add(DEV_CLIENT, "client", "development", ["*"], features_doc(("dev-flag", "default", True)))
    counting.add(PROD_CLIENT, "client", "production", ["*"], features_doc(("prod-flag", "default", True)))
    counting.add(DEV_FRONTEND, "frontend", "development", ["*"])
    counting.add(PROD_FRONTEND, "frontend", "production", ["*"])
    return counting


@pytest.fixture
def started(stub: CountingUpstream) -> Iterator[list[EdgeProcess]]:
    processes: list[EdgeProcess] = []
    yield processes
    for process in processes:
        process.stop()


def start(
    started: list[EdgeProcess], stub: CountingUpstream, *extra: str, tokens: tuple = (DEV_CLIENT,)
) -> EdgeProcess:
    process = edge(stub.url, list(tokens), *extra)
    started.append(process)
    process.wait_ready()
    return process


def flag_names(body: bytes) -> set[str]:
    return {t["name"] for t in orjson.loads(body)["toggles"]}


def test_a_known_token_is_asked_about_once(stub: CountingUpstream, started: list[EdgeProcess]) -> None:
    process = start(started, stub)
    before = len(stub.asked)
    for _ in range(5):
        status, _, body = process.get("/api/frontend", DEV_FRONTEND)
        assert status == 200 and flag_names(body) == {"dev-flag"}
    assert stub.asked[before:] == [DEV_FRONTEND]


def test_refusals_are_cached_too(stub: CountingUpstream, started: list[EdgeProcess]) -> None:
    process = start(started, stub)
    before = len(stub.asked)
    for _ in range(5):
        assert process.get("/api/frontend", "*:development.made-up")[0] == 403
    assert stub.asked[before:] == ["*:development.made-up"]
    assert process.get("/api/frontend", "no-token-shape")[0] == 403
    assert "no-token-shape" not in stub.asked  # not a token: nothing to ask


def test_a_storm_of_random_tokens_costs_one_look_at_each(
    stub: CountingUpstream, started: list[EdgeProcess]
) -> None:
    process = start(started, stub)
    stub.validate_delay = 0.2  # so requests pile up while the first answers are awaited
    asked_before = len(stub.asked)
    tokens = [f"*:development.{secrets.token_hex(16)}" for _ in range(150)]
    # Every token is sent by two clients at once: single flight must hold them to one look.
    requests = [t for t in tokens for _ in range(2)]
    with ThreadPoolExecutor(150) as pool:
        statuses = list(pool.map(lambda t: process.get("/api/frontend", t)[0], requests))
    assert set(statuses) == {403}
    asked = stub.asked[asked_before:]
    assert sorted(asked) == sorted(tokens)  # each once, none twice
    with ThreadPoolExecutor(50) as pool:
        assert set(pool.map(lambda t: process.get("/api/client/features", t)[0], tokens)) == {403}
    assert len(stub.asked) - asked_before == len(tokens)  # the refusals were remembered


def test_an_unreachable_validation_is_401_and_not_remembered(
    stub: CountingUpstream, started: list[EdgeProcess]
) -> None:
    process = start(started, stub)
    stub.validate_status = 503
    assert process.get("/api/frontend", DEV_FRONTEND)[0] == 401
    stub.validate_status = 200
    assert process.get("/api/frontend", DEV_FRONTEND)[0] == 200


def test_a_revoked_token_stops_working_at_revalidation(
    stub: CountingUpstream, started: list[EdgeProcess]
) -> None:
    process = start(started, stub, "--token-revalidation-interval-seconds", "1")
    assert process.get("/api/frontend", DEV_FRONTEND)[0] == 200
    del stub.tokens[DEV_FRONTEND]
    deadline = time.monotonic() + 15
    while process.get("/api/frontend", DEV_FRONTEND)[0] == 200:
        assert time.monotonic() < deadline, "the revoked token still works"
        time.sleep(0.2)
    assert process.get("/api/frontend", DEV_FRONTEND)[0] == 403
    _, _, body = process.get("/internal-backstage/tokens")
    assert b"frontend-secret" not in body and b"sync-secret" not in body


def test_strict_serves_only_what_start_up_tokens_cover(
    stub: CountingUpstream, started: list[EdgeProcess]
) -> None:
    process = start(started, stub)
    assert process.get("/api/client/features", PROD_CLIENT)[0] == 403
    status, _, body = process.get("/api/frontend", PROD_FRONTEND)
    assert status == 511
    assert orjson.loads(body)["access"] == {"environment": "production", "project": "*"}
    assert not stub.received("/api/client/features") or all(
        r["token"] == DEV_CLIENT for r in stub.received("/api/client/features")
    )


def test_dynamic_syncs_a_new_client_tokens_environment(
    stub: CountingUpstream, started: list[EdgeProcess]
) -> None:
    process = start(started, stub, "--dynamic")
    status, _, body = process.get("/api/client/features", PROD_CLIENT)
    assert status == 200, body
    assert [f["name"] for f in orjson.loads(body)["features"]] == ["prod-flag"]
    assert any(r["token"] == PROD_CLIENT for r in stub.received("/api/client/features"))
    status, _, body = process.get("/api/frontend", PROD_FRONTEND)  # now covered
    assert status == 200 and flag_names(body) == {"prod-flag"}
    assert flag_names(process.get("/api/frontend", DEV_FRONTEND)[2]) == {"dev-flag"}


def test_dynamic_without_start_up_tokens(stub: CountingUpstream, started: list[EdgeProcess]) -> None:
    process = edge(stub.url, [], "--dynamic")
    started.append(process)
    process.wait_ready()  # nothing to wait for
    assert process.get("/api/frontend", DEV_FRONTEND)[0] == 511
    assert process.get("/api/client/features", DEV_CLIENT)[0] == 200
    assert process.get("/api/frontend", DEV_FRONTEND)[0] == 200


def test_pretrusted_tokens_are_never_asked_about(stub: CountingUpstream, started: list[EdgeProcess]) -> None:
    """PRETRUSTED_TOKENS as a Node-proxy user sets it: `<key>@<environment>` entries are sent as the
    key alone (the text before the last `@`, so a key may hold an `@`), full tokens as written."""
    trusted = "node-proxy-key@development,team@example.com@development,*:development.trusted-frontend"
    process = edge(stub.url, [DEV_CLIENT], env={"PRETRUSTED_TOKENS": trusted})
    started.append(process)
    process.wait_ready()
    for token in (
        "node-proxy-key",
        "team@example.com",
        "Bearer node-proxy-key",
        "*:development.trusted-frontend",
    ):
        status, _, body = process.get("/api/frontend", token)
        assert status == 200 and flag_names(body) == {"dev-flag"}, (token, status)
    assert not {"node-proxy-key", "team@example.com", "*:development.trusted-frontend"} & set(stub.asked)
    assert (
        process.get("/api/client/features", "node-proxy-key")[0] == 403
    )  # a frontend key, not a client token
    # The entry's whole text is not the key, nor is the key with another environment.
    for sent in ("node-proxy-key@development", "node-proxy-key@production", "team@example.com@development"):
        assert process.get("/api/frontend", sent)[0] == 403, sent
    described = orjson.loads(process.get("/internal-backstage/tokens")[2])["tokens"]
    assert "node-proxy-key" not in str(described) and "team@example.com" not in str(described)


def _full_checks(process: EdgeProcess) -> int:
    from prometheus_client.parser import text_string_to_metric_families

    text = process.get("/internal-backstage/metrics")[2].decode()
    family = next(f for f in text_string_to_metric_families(text) if f.name == "edge_token_full_checks")
    return int(family.samples[0].value)


def test_a_bearer_token_takes_the_one_lookup_path(stub: CountingUpstream, started: list[EdgeProcess]) -> None:
    """`Authorization: Bearer <token>` is the same token as `<token>`: once it has passed, neither form
    is checked in full again: the one-lookup path is keyed by the secret, whatever the header's scheme."""
    process = start(started, stub)
    for path, token in (("/api/frontend", DEV_FRONTEND), ("/api/client/features", DEV_CLIENT)):
        assert process.get(path, f"Bearer {token}")[0] == 200
        before = _full_checks(process)
        for sent in (f"Bearer {token}", f"bearer {token}", token) * 5:
            assert process.get(path, sent)[0] == 200
        assert _full_checks(process) == before, path
        assert process.get(path, "Bearer *:development.unknown-secret")[0] == 403
        assert _full_checks(process) == before + 1  # a refusal is checked in full: the counter counts


def test_no_secret_reaches_the_log(stub: CountingUpstream, started: list[EdgeProcess]) -> None:
    process = start(started, stub, "--log-level", "debug", "--token-revalidation-interval-seconds", "1")
    process.get("/api/frontend", DEV_FRONTEND)
    process.get("/api/frontend", "*:development.made-up-secret")
    process.get("/api/client/features", PROD_CLIENT)  # not covered: refused
    del stub.tokens[DEV_FRONTEND]  # revoked: the revalidation says so in the log
    deadline = time.monotonic() + 15
    while process.get("/api/frontend", DEV_FRONTEND)[0] == 200:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    started.remove(process)
    said = "".join(process.stop())
    assert "no longer valid" in said and "*:development.****" in said
    for secret in ("sync-secret", "frontend-secret", "made-up-secret", "prod-sync-secret"):
        assert secret not in said


def test_one_fetch_per_environment_when_a_token_covers_another(
    stub: CountingUpstream, started: list[EdgeProcess]
) -> None:
    narrow = stub.add("default:development.narrow-sync", "client", "development", ["default"])
    process = start(started, stub, tokens=(narrow, DEV_CLIENT))  # the narrow one first on the command line
    refreshes = orjson.loads(process.get("/internal-backstage/tokens")[2])["tokenRefreshes"]
    assert [(r["environment"], r["projects"]) for r in refreshes] == [("development", ["*"])]
    assert {r["token"] for r in stub.received("/api/client/features")} == {DEV_CLIENT}
    status, _, body = process.get("/api/client/features", narrow)  # cut from the broader feed
    assert status == 200 and [f["name"] for f in orjson.loads(body)["features"]] == ["dev-flag"]


def test_a_sync_token_refused_later_keeps_the_last_flags_and_says_which(
    stub: CountingUpstream, started: list[EdgeProcess]
) -> None:
    process = start(started, stub)
    polls = len(stub.received("/api/client/features"))
    del stub.tokens[DEV_CLIENT]  # the upstream answers 403 to its polls from now on
    stub.wait_for("/api/client/features", polls + 1)
    status, _, body = process.get("/api/frontend", DEV_FRONTEND)
    assert status == 200 and flag_names(body) == {"dev-flag"}  # the last good flags
    started.remove(process)
    said = "".join(process.stop())
    assert "the --tokens token *:development.**** is not allowed to read features" in said
    assert "sync-secret" not in said


def test_a_failing_validation_is_said_once_while_it_lasts(
    stub: CountingUpstream, started: list[EdgeProcess]
) -> None:
    # Not ready, the edge asks again every second: it printed the same WARN line at every attempt.
    stub.validate_status = 401
    process = edge(stub.url, [DEV_CLIENT])
    started.append(process)
    deadline = time.monotonic() + 30  # liveness only
    while stub.validate_calls < 3:
        assert time.monotonic() < deadline and process.popen.poll() is None, process.stop()
        time.sleep(0.1)
    process.stop()
    printed = process.printed["stdout"] + process.printed["stderr"]
    assert printed.count("Validating 1 token(s) upstream failed: answered 401") == 1, printed
