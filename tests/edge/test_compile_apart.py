"""`flagproxy edge` with one worker leads itself on its serving loop: a feed's change is compiled in a
process of its own while requests are answered from the old snapshot (flagproxy/instance/compiler.py,
flagproxy/edge/feeds.py). Proved by ordering, as for the proxy (tests/http/test_compile_apart.py): the
compile process is stopped, the upstream serves a new document, requests still get the old ETag; once it
continues, the new flags are served."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.edge.harness import CountingUpstream, EdgeProcess, edge, features_doc
from tests.http.test_compile_apart import compile_processes

CLIENT = "*:development.apart-client"


def features(process: EdgeProcess) -> tuple[int, str, bytes]:
    status, headers, body = process.get("/api/client/features", CLIENT)
    return status, headers.get("etag", ""), body


def served(process: EdgeProcess, name: str) -> None:
    deadline = time.monotonic() + 30
    while f'"{name}"'.encode() not in features(process)[2]:
        assert time.monotonic() < deadline, f"{name} was never served"
        time.sleep(0.05)


def feature_polls(upstream: CountingUpstream) -> int:
    return sum(1 for r in upstream.requests if r["path"] == "/api/client/features")


def test_a_feed_change_compiles_apart_while_the_old_snapshot_answers(counting: CountingUpstream) -> None:
    counting.add(CLIENT, "client", "development", ["*"], features_doc(("first", "default", True)))
    process = edge(counting.url, [CLIENT])
    try:
        process.wait_ready()
        # A first change starts the compile process (the first document compiled before anything was served).
        counting.documents[CLIENT] = features_doc(("first", "default", True), ("second", "default", True))
        served(process, "second")
        old = features(process)
        compilers = compile_processes(process)
        assert len(compilers) == 1, "the change was not compiled in a process of its own"
        os.kill(compilers[0], signal.SIGSTOP)
        try:
            polls = feature_polls(counting)
            counting.documents[CLIENT] = features_doc(("third", "default", True))
            deadline = time.monotonic() + 30
            while feature_polls(counting) < polls + 1:  # the new document was answered: its compile waits
                assert time.monotonic() < deadline, "the feed stopped polling"
                time.sleep(0.05)
            for _ in range(20):
                assert features(process) == old
        finally:
            os.kill(compilers[0], signal.SIGCONT)
        served(process, "third")
    finally:
        process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0
    assert not [pid for pid in compilers if Path(f"/proc/{pid}").exists()], "the compile process outlived it"
