"""Offline mode: flags from a bootstrap file, no upstream; the file changed, broken, replaced under it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from tests.edge.harness import EdgeProcess, features_doc

DEV = "*:development.offline-secret"
PROD = "*:production.offline-prod-secret"
FRONTEND_ONLY = "*:development.offline-frontend"
CLIENT_ONLY = "*:development.offline-client"


def write(path: Path, document: object) -> None:
    """Replace the file at once, as a config-map update or an editor's save-and-rename does."""
    temporary = path.with_suffix(".tmp")
    temporary.write_bytes(orjson.dumps(document))
    os.replace(temporary, path)


def names(process: EdgeProcess, token: str, path: str = "/api/frontend") -> set[str]:
    status, _, body = process.get(path, token)
    assert status == 200, (status, body)
    return {t["name"] for t in orjson.loads(body)["toggles"]}


def eventually(check: Callable[[], bool], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.1)


@pytest.fixture
def offline(tmp_path: Path) -> Iterator[tuple[EdgeProcess, Path]]:
    path = tmp_path / "features.json"
    write(path, features_doc(("first", "default", True)))
    process = EdgeProcess(
        ["offline", "--bootstrap-file", str(path), "--tokens", DEV, "--frontend-tokens",
         f"{FRONTEND_ONLY},plain-offline-key", "--client-tokens", CLIENT_ONLY, "--reload-interval", "1"]
    )  # fmt: skip
    process.wait_ready()
    yield process, path
    process.stop()


def test_serves_the_file_to_its_tokens(offline: tuple[EdgeProcess, Path]) -> None:
    process, _ = offline
    assert names(process, "plain-offline-key") == {"first"}  # any string is a token offline, as in Edge
    assert names(process, DEV) == {"first"}
    assert names(process, FRONTEND_ONLY) == {"first"}
    status, _, body = process.get("/api/client/features", CLIENT_ONLY)
    assert status == 200 and [f["name"] for f in orjson.loads(body)["features"]] == ["first"]
    assert process.get("/api/client/features", DEV)[0] == 200
    assert process.get("/api/client/features", FRONTEND_ONLY)[0] == 403
    assert process.get("/api/frontend", CLIENT_ONLY)[0] == 403
    assert process.get("/api/frontend", "*:development.unknown")[0] == 403
    assert process.get("/internal-backstage/ready")[0] == 200


def test_picks_up_a_changed_file(offline: tuple[EdgeProcess, Path]) -> None:
    process, path = offline
    write(path, features_doc(("first", "default", False), ("second", "default", True)))
    eventually(lambda: names(process, DEV) == {"second"})
    # Written in place (truncate, then write), as `cp` or `echo >` does.
    path.write_bytes(orjson.dumps(features_doc(("third", "default", True))))
    eventually(lambda: names(process, DEV) == {"third"})


def test_keeps_the_last_good_flags_through_a_broken_or_missing_file(
    offline: tuple[EdgeProcess, Path],
) -> None:
    process, path = offline
    path.write_bytes(b'{"version": 2, "features": [')  # half written
    time.sleep(1.5)  # at least one reload has read it
    assert names(process, DEV) == {"first"}
    path.write_bytes(b'{"not": "features"}')
    path.unlink()
    time.sleep(1.5)
    assert names(process, DEV) == {"first"}
    write(path, features_doc(("back", "default", True)))
    eventually(lambda: names(process, DEV) == {"back"})
    said = "".join(process.stop())
    assert "not JSON" in said and said.count("keeping the last good flags") >= 2


def test_a_map_of_environments(tmp_path: Path) -> None:
    path = tmp_path / "environments.json"
    write(
        path,
        {
            "development": features_doc(("dev-flag", "default", True)),
            "production": features_doc(("prod-flag", "default", True)),
        },
    )
    tokens = f"{DEV},{PROD},*:staging.x,legacy-key@production,any-string"
    process = EdgeProcess(["offline", "--bootstrap-file", str(path), "--tokens", tokens])
    try:
        process.wait_ready()
        assert names(process, DEV) == {"dev-flag"}
        assert names(process, PROD) == {"prod-flag"}
        assert process.get("/api/client/features", "*:staging.x")[0] == 403  # no document for it
        assert names(process, "legacy-key@production") == {"prod-flag"}
        assert process.get("/api/frontend", "any-string")[0] == 403  # no `default` document in the map
    finally:
        process.stop()
