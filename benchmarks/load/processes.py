"""Child processes of a load run: started in their own session, stopped without ever hanging the harness.

Each service runs in a new session (its own process group), so Ctrl-C in the terminal reaches only the
harness, which then stops everything in order. `stop()` sends SIGTERM to the main process only, as
`docker stop` would, waits, then SIGKILLs the whole group: a Sanic manager that hangs on shutdown, or
workers it left behind, cannot keep the run (or CI) waiting. Whether the stop was clean is recorded.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

STOP_TIMEOUT = 10.0  # seconds between SIGTERM and SIGKILL
QUIET_CORES = 0.1  # CPU the services may use together for the machine to count as quiet before a run
QUIET_TIMEOUT = 60.0  # seconds to wait for that
_PORT_TAKEN = ("errno 98", "eaddrinuse", "address already in use")


class ServiceExited(RuntimeError):
    """The process ended while we waited for it to be ready."""

    def __init__(self, message: str, log_tail: str) -> None:
        super().__init__(f"{message}:\n{log_tail}")
        # free_port() only finds a port that was free a moment ago; another process may have bound it.
        self.port_taken = any(marker in log_tail.lower() for marker in _PORT_TAKEN)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Response:
    status: int
    header_list: list[tuple[str, str]]  # as sent, in order
    body: bytes

    @property
    def headers(self) -> dict[str, str]:
        """Names in lower case."""
        return {name.lower(): value for name, value in self.header_list}


def fetch(
    port: int, method: str, path: str, headers: Mapping[str, str] | None = None, body: bytes | None = None
) -> Response:
    """One request on a fresh connection, for probes and readiness checks (never under load)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=dict(headers or {}))
        response = conn.getresponse()
        data = response.read()
        return Response(response.status, response.getheaders(), data)
    finally:
        conn.close()


@dataclass
class Service:
    """One started process (and its process group)."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    port: int
    stopped_cleanly: bool | None = field(default=None)

    @classmethod
    def start(
        cls, name: str, command: Sequence[str], env: Mapping[str, str], port: int, log_dir: Path, cwd: Path
    ) -> Service:
        log_path = log_dir / f"{name}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                list(command),
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return cls(name, process, log_path, port)

    def wait_until(self, ready: Callable[[], bool], timeout: float) -> None:
        """Poll `ready()` (connection errors count as not ready) until it holds; raise with the log's
        tail if the process dies or `timeout` passes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServiceExited(f"{self.name} exited with {self.process.returncode}", self.log_tail())
            try:
                if ready():
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} was not ready within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        process = self.process
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
                self.stopped_cleanly = True
            except subprocess.TimeoutExpired:
                self.stopped_cleanly = False
        else:
            self.stopped_cleanly = process.returncode == 0
        # Whatever is left in the group (a hung manager, orphaned workers) goes now.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)

    def rss(self) -> dict[str, object]:
        """Resident memory in MiB: the main process, and each Sanic worker (children that Sanic's worker
        manager started with SANIC_WORKER_NAME=Sanic-Server-*; its sync manager and multiprocessing's
        resource tracker are not workers)."""
        workers = [rss_mib(pid) for pid in children(self.process.pid) if is_sanic_worker(pid)]
        return {"main": rss_mib(self.process.pid), "workers": [w for w in workers if w is not None]}


def _group_stats(pgid: int) -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of /proc/pid/stat after "pid (comm)") of each live process of a process group."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # After "pid (comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:
            yield int(stat.parent.name), fields


def group_cpu_seconds(pgid: int) -> float:
    """CPU time (user and system) used so far by the live processes of a process group (a service and
    everything it started: each service runs in a session of its own)."""
    ticks = sum(int(fields[11]) + int(fields[12]) for _, fields in _group_stats(pgid))
    return ticks / os.sysconf("SC_CLK_TCK")


def group_pids(pgid: int) -> list[int]:
    """The live processes of a process group."""
    return [pid for pid, _ in _group_stats(pgid)]


@contextlib.contextmanager
def pinned(pgids: Sequence[int], cpus: set[int]) -> Iterator[None]:
    """Every thread of the process groups `pgids` kept on `cpus` while the block runs, then let go on the
    CPUs they had: a load generator in this process can then have a CPU of its own (`os.sched_setaffinity`
    on the caller), as a client on another machine would, instead of taking turns with the server."""
    before: dict[int, set[int]] = {}
    try:
        for pgid in pgids:
            for pid in group_pids(pgid):
                for task in Path(f"/proc/{pid}/task").iterdir():
                    with contextlib.suppress(OSError, ValueError):
                        tid = int(task.name)
                        before[tid] = os.sched_getaffinity(tid)
                        os.sched_setaffinity(tid, cpus)
        yield
    finally:
        for tid, cpus_before in before.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, cpus_before)


def wait_until_quiet(
    pgids: Sequence[int], cores: float = QUIET_CORES, window: float = 1.0, timeout: float = QUIET_TIMEOUT
) -> float | None:
    """Wait until the process groups together use less than `cores` of CPU over `window` seconds: no
    service still busy with the last run (the Node proxy works through its backlog for seconds after wrk
    stops) or with starting up takes CPU from the next one measured. Returns the seconds waited, or None
    when they were still busy after `timeout`."""
    start = time.monotonic()
    before = sum(group_cpu_seconds(p) for p in pgids)
    while True:
        time.sleep(window)
        after = sum(group_cpu_seconds(p) for p in pgids)
        if after - before < cores * window:  # a process that exited only makes the sum smaller
            return time.monotonic() - start
        if time.monotonic() - start >= timeout:
            return None
        before = after


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(p) for p in task.read_text().split()]
        except OSError:
            continue
    return sorted(found)


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def is_sanic_worker(pid: int) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(item.startswith(b"SANIC_WORKER_NAME=Sanic-Server") for item in environ)
