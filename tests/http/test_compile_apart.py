"""`flagproxy proxy --workers 1` compiles a new features document in a process of its own while its one loop
goes on answering from the old snapshot (flagproxy/instance/compiler.py). Before, the compile ran on the
serving loop: every change held every answer for the length of a compile (half a second at 5000 flags).

Proved by ordering, not by timing: the compile process is stopped (SIGSTOP) before the upstream changes,
so the new document cannot finish compiling; requests sent after the upstream answered the new document
are still answered, with the old ETag; once the compile process continues, the new snapshot is served.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.http.loopback import KEY, StubUpstream, fetch
from tests.http.processes import Process
from tests.http.test_workers import proxy_env

pytestmark = pytest.mark.slow


def compile_processes(process: Process) -> list[int]:
    """The children of the proxy's process that multiprocessing spawned (the compile process)."""
    found = []
    for task in Path(f"/proc/{process.popen.pid}/task").glob("*/children"):
        for pid in task.read_text().split():
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in command:
                found.append(int(pid))
    return found


def change(upstream: StubUpstream, name: str) -> None:
    revised = copy.deepcopy(upstream.payload)
    revised["features"].append({"name": name, "enabled": True, "strategies": [{"name": "default"}]})
    upstream.payload = revised


def answer(process: Process) -> tuple[int, str, bytes]:
    status, headers, body = fetch(process.port, "GET", "/proxy?userId=u1", headers={"Authorization": KEY})
    return status, headers.get("etag", ""), body


def revision(process: Process) -> int:
    status, _, body = fetch(process.port, "GET", "/proxy/status.json", headers={"Authorization": KEY})
    assert status == 200, body
    return int(json.loads(body)["revision"])


def test_requests_are_answered_from_the_old_snapshot_while_the_new_one_compiles(
    launch, upstream: StubUpstream
):
    process = launch(proxy_env(upstream, SERVICE_FETCH_INTERVAL="100"))  # --workers 1, the default
    process.wait_ready()
    # The first document was compiled apart too: the serving process never parsed one.
    assert len(compile_processes(process)) == 1, "the first document was compiled in the serving process"
    change(upstream, "first-change")
    deadline = time.monotonic() + 30
    while b"first-change" not in answer(process)[2]:
        assert time.monotonic() < deadline, "the first change was never served"
        time.sleep(0.05)
    old = answer(process)
    assert old[0] == 200 and old[1]
    old_revision = revision(process)
    compilers = compile_processes(process)
    assert len(compilers) == 1, "the change was not compiled in a process of its own"
    os.kill(compilers[0], signal.SIGSTOP)
    try:
        polls = len(upstream.received("/api/client/features"))
        change(upstream, "compiled-apart")
        # The next poll is answered with the new document (its ETag is new): its compile is now waiting on
        # the stopped process.
        upstream.wait_for("/api/client/features", polls + 1, timeout=30)
        for _ in range(20):
            assert answer(process) == old
        assert revision(process) == old_revision
    finally:
        os.kill(compilers[0], signal.SIGCONT)
    deadline = time.monotonic() + 30
    while b"compiled-apart" not in answer(process)[2]:
        assert time.monotonic() < deadline, "the new document was never served"
        time.sleep(0.05)
    new = answer(process)
    assert new[1] != old[1] and revision(process) > old_revision
    _, stderr = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, stderr
    assert not [pid for pid in compilers if Path(f"/proc/{pid}").exists()], "the compile process outlived it"


SERVER = "server-sdk-token"  # may read /proxy/client/features


def answers(process: Process) -> list[tuple[int, str, bytes]]:
    """(status, ETag, body) of every kind of answer a snapshot makes, for contexts that read no clock and
    no randomness (stickiness on the userId given)."""
    found = []
    for user in ("u1", "u2", "u77", "u1234"):
        for method, path, body in (
            ("GET", f"/proxy?userId={user}&sessionId=s", None),
            ("POST", "/proxy", json.dumps({"context": {"userId": user, "sessionId": "s"}}).encode()),
        ):
            headers = {"Authorization": KEY, "Content-Type": "application/json"}
            status, got, answer_body = fetch(process.port, method, path, body=body, headers=headers)
            found.append((status, got.get("etag", ""), answer_body))
    status, got, body = fetch(
        process.port, "GET", "/proxy/client/features", headers={"Authorization": SERVER}
    )
    found.append((status, got.get("etag", ""), body))
    return found


def test_a_change_compiled_apart_and_loaded_in_batches_is_served_byte_for_byte(
    launch, upstream: StubUpstream
):
    """The new path (the upstream's bytes parsed, checked and compiled in the compile process, published as
    they came, the image loaded a batch at a time between requests) serves what a proxy that compiled the
    same document before listening serves: every body and ETag the same."""
    from benchmarks.datasets import snapshot_payload

    upstream.payload = snapshot_payload(400)  # an image of many batches
    env = proxy_env(upstream, SERVICE_FETCH_INTERVAL="100", EXP_SERVER_SIDE_SDK_CONFIG_TOKENS=SERVER)
    process = launch(env)  # --workers 1, the default
    process.wait_ready()
    changed = copy.deepcopy(upstream.payload)
    changed["features"][3]["enabled"] = not changed["features"][3]["enabled"]
    changed["features"].append(
        {"name": "changed-apart", "enabled": True, "strategies": [{"name": "default"}]}
    )
    upstream.payload = changed
    deadline = time.monotonic() + 60
    while b"changed-apart" not in answer(process)[2]:
        assert time.monotonic() < deadline, "the change was never served"
        time.sleep(0.05)
    assert len(compile_processes(process)) == 1, "the change was not compiled in a process of its own"
    served = answers(process)
    assert [status for status, _, _ in served] == [200] * len(served), [s[:2] for s in served]
    fresh = launch(env)
    fresh.wait_ready()
    assert b"changed-apart" in answer(fresh)[2]
    assert answers(fresh) == served


def thread_niceness(pid: int) -> list[int]:
    """The nice value of each thread of process `pid` (field 19 of /proc/<pid>/task/<tid>/stat)."""
    found = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        found.append(int(fields[16]))
    return found


def test_with_several_workers_the_compile_thread_runs_at_nice_5(launch, upstream: StubUpstream) -> None:
    """`--workers N` compiles in a thread of the main process at nice 5 (flagproxy/instance/compiler.py
    COMPILE_THREAD_NICENESS). At nice 10, with the workers and a load holding every core, a compile got so
    little CPU that no change was served while the load lasted (benchmarks/README.md: upstream changes)."""
    process = launch(proxy_env(upstream), ["--workers", "2"])
    process.wait_ready()  # the first document was compiled in that thread: it exists from then on
    niceness = thread_niceness(process.popen.pid)
    assert 5 in niceness and 10 not in niceness, niceness
    process.stop(signal.SIGTERM)
