"""`flagproxy proxy` as a real process in its own process group, and what it holds: its workers' sockets.
`ProxyUnderTest` is one configured from keyword options the way an operator does, each through its
environment variable."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flagproxy.proxy.settings import OPTIONS_BY_KEY, ProxySettings
from tests.http.loopback import ProxyCalls, StubUpstream, fetch, free_port


class Process:
    def __init__(self, args: list[str], env: dict[str, str], command: list[str] | None = None) -> None:
        self.port = int(env["PORT"]) if "PORT" in env else free_port()
        if command is None:
            command = [sys.executable, "-m", "flagproxy", "proxy"]
            env = {**env, "PORT": str(self.port), "PROXY_HOST": "127.0.0.1"}
        self.printed = {"stdout": "", "stderr": ""}
        self.stopped: tuple[str, str] | None = None
        self.popen = subprocess.Popen(
            [*command, *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, so workers can be cleaned up with it
        )

    def wait_ready(self, timeout: float = 20, health: str = "/proxy/health") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.popen.poll() is None, self.popen.communicate()
            try:
                if fetch(self.port, "GET", health, timeout=1)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("the proxy process never became ready")

    def read_until(self, text: str, timeout: float = 20) -> str:
        """What the process printed (both streams) from here up to and including `text`; `printed` keeps
        each stream whole."""
        pipes = {self.popen.stdout: "stdout", self.popen.stderr: "stderr"}
        seen = ""
        deadline = time.monotonic() + timeout
        while text not in seen:
            assert time.monotonic() < deadline, seen
            readable, _, _ = select.select(list(pipes), [], [], 0.1)
            for pipe in readable:
                chunk = os.read(pipe.fileno(), 65536).decode(errors="replace")
                seen += chunk
                self.printed[pipes[pipe]] += chunk
        return seen

    def stop(self, signum: int = signal.SIGINT) -> tuple[str, str]:
        """Stop it; what it printed that read_until had not read (all of each stream is in `printed`).
        Stopping it again gives the same answer."""
        if self.stopped is not None:
            return self.stopped
        if self.popen.poll() is None:
            self.popen.send_signal(signum)
        try:
            out, err = self.popen.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            out, err = "", "did not stop in time"
        finally:
            # Whatever is left of the group (a worker that outlived the main process) goes too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            if self.popen.poll() is None:
                self.popen.wait(5)
            for pipe in (self.popen.stdout, self.popen.stderr):
                if pipe is not None:
                    pipe.close()  # read or not: an open pipe left to the garbage collector is a warning
        self.printed["stdout"] += out
        self.printed["stderr"] += err
        self.stopped = (out, err)
        return out, err


def process_env(tmp: Path) -> dict[str, str]:
    """A child's environment: the few variables it needs from ours, and TMPDIR, where the proxy's default
    backup file goes, a folder of its own."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH", "VIRTUAL_ENV")}
    return {**keep, "TMPDIR": str(tmp)}


def option_env(options: dict[str, Any]) -> dict[str, str]:
    """The environment that sets each keyword option: its variable, a list comma-separated, a bool as
    true/false. An option with no variable (a logger or storage object) cannot be given to a process."""
    env = {}
    for key, value in options.items():
        if value is None:
            continue  # left unset
        names = OPTIONS_BY_KEY[key].env
        assert names, f"{key} has no environment variable: embed it (tests/http/embedded.py)"
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            text = ",".join(str(v) for v in value)
        else:
            text = str(value)
        env[names[0]] = text
    return env


class ProxyUnderTest(Process, ProxyCalls):
    """A real `flagproxy proxy` configured by its environment (`base_env` plus `options`), with the
    request helpers of tests/http/loopback.py's ProxyCalls."""

    command: list[str] | None = None  # `flagproxy proxy`

    def __init__(
        self, options: dict[str, Any], upstream: StubUpstream | None, base_env: dict[str, str]
    ) -> None:
        self.env = {**base_env, **option_env(options)}
        # What the process reads, used only for where to send requests (the key's header, the base path): the
        # tests of those two options send literal headers and paths (test_service_routes.py test_base_path,
        # test_custom_key_header; test_status_data.py), so a misread option cannot pass unseen through this.
        self.settings = ProxySettings.load({}, env=self.env)
        self.upstream = upstream
        self._start()

    def _start(self) -> None:
        Process.__init__(self, [], self.env, self.command)

    def _again_if_the_port_was_taken(self, wait: Any) -> None:
        """free_port() finds a port free only a moment before the child binds it: when another process took
        it in between, start again on another one."""
        for attempt in range(3):
            try:
                return wait()
            except AssertionError as error:
                if "Address already in use" not in str(error) or attempt == 2:
                    raise
                self._start()

    def wait_ready(self, timeout: float = 20, health: str | None = None) -> None:
        path = health or f"{self.settings.proxy_base_path}/proxy/health"
        self._again_if_the_port_was_taken(lambda: Process.wait_ready(self, timeout, path))

    def wait_listening(self, timeout: float = 20) -> None:
        """Until it answers at all (503 before its first snapshot)."""

        def listening() -> None:
            deadline = time.monotonic() + timeout
            while True:
                assert self.popen.poll() is None, self.popen.communicate()
                try:
                    fetch(self.port, "GET", f"{self.settings.proxy_base_path}/proxy/health", timeout=1)
                    return
                except OSError:
                    assert time.monotonic() < deadline, "the proxy process never listened"
                    time.sleep(0.1)

        self._again_if_the_port_was_taken(listening)


EMBEDDING = Path(__file__).with_name("embedded.py")


class EmbeddedProxy(ProxyUnderTest):
    """A program that embeds the proxy (tests/http/embedded.py: create_app with `keywords`, a logger or a
    storage provider object, then Sanic's app.run), in a process of its own with `env` as its environment."""

    def __init__(self, spec: dict[str, Any], env: dict[str, str], upstream: StubUpstream | None) -> None:
        self.env = dict(env)
        self.settings = ProxySettings.load(spec.get("keywords", {}), env=self.env)
        self.command = [sys.executable, str(EMBEDDING), json.dumps(spec)]
        self.upstream = upstream
        self._start()

    def _start(self) -> None:
        self.env["PORT"] = str(free_port())  # the program listens on $PORT; a new one at each start
        super()._start()


def sockets_by_process(port: int, group: int) -> dict[str, dict[int, int]]:
    """{"listen"|"established": {pid: count}} of the IPv4 TCP sockets on local `port` held by processes of
    process group `group`, read from /proc (what `ss -tnp` shows)."""
    states = {"0A": "listen", "01": "established"}
    inodes: dict[str, str] = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] in states:
            inodes[fields[9]] = states[fields[3]]
    found: dict[str, dict[int, int]] = {"listen": {}, "established": {}}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getpgid(int(proc.name)) != group:
                continue
            links = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
        except OSError:  # gone meanwhile, or not ours to read
            continue
        for link in links:
            state = inodes.get(link.removeprefix("socket:[").removesuffix("]"))
            if state:
                found[state][int(proc.name)] = found[state].get(int(proc.name), 0) + 1
    return found


def wait_until_listening(process: Process, workers: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while len(sockets_by_process(process.port, process.popen.pid)["listen"]) < workers:
        assert time.monotonic() < deadline, "not every worker is listening"
        time.sleep(0.05)


def listening_workers(process: Process) -> set[int]:
    return set(sockets_by_process(process.port, process.popen.pid)["listen"])


def worker_serving(process: Process, client_port: int) -> int | None:
    """The pid of the worker holding the server side of the connection from local `client_port`, found in
    /proc as `ss -tnp` would: no debug header, the proxy answers exactly as in production."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1].split(":")[1], fields[2].split(":")[1]
        if int(local, 16) == process.port and int(remote, 16) == client_port and fields[3] == "01":
            inode = fields[9]
    if inode is None:
        return None
    for pid in listening_workers(process):
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        if f"socket:[{inode}]" in links:
            return pid
    return None


def ask_worker(
    process: Process, method: str, path: str, headers: dict[str, str], body: str | bytes | None = None
) -> tuple[int, dict[str, str], bytes, int | None]:
    """One request on a new connection: status, headers, body and the pid of the worker that answered."""
    connection = http.client.HTTPConnection("127.0.0.1", process.port, timeout=10)
    try:
        connection.connect()
        client_port = connection.sock.getsockname()[1]
        if body is not None:
            headers = {**headers, "Content-Type": "application/json"}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        worker = worker_serving(process, client_port)  # the connection is still open (keep-alive)
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data, worker
    finally:
        connection.close()


def stop_group_under_load(
    process: Process, signum: int, request: Callable[[], tuple[int, dict[str, str], bytes, Any]], ok: int
) -> tuple[dict[str, int], list[str], str]:
    """Send `request()` from four threads until the process group, signalled with `signum` once answers
    flow (more than 50), has exited: ({"ok": answered with `ok` and their whole body, "refused": nothing
    listening, "closed": closed before any answer}, every other outcome, the process's stdout + stderr).
    A stop must finish every request it accepted: `problems` empty, exit status 0."""
    outcomes: dict[str, int] = {"ok": 0, "refused": 0, "closed": 0}
    problems: list[str] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            try:
                status, headers, body, _ = request()
            except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError, ConnectionAbortedError):
                # Nothing listening any more, or the kernel reset a connection that was never accepted:
                # no request reached the process.
                outcomes["refused"] += 1
                time.sleep(0.01)
                continue
            except http.client.RemoteDisconnected:
                outcomes["closed"] += 1  # closed before any answer: the request was never handled
                continue
            except Exception as exc:  # IncompleteRead and the like: a truncated answer
                problems.append(repr(exc))
                continue
            if status != ok or int(headers.get("content-length", "0")) != len(body):
                problems.append(f"{status} {headers} {body[:80]!r}")
                continue
            outcomes["ok"] += 1

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        # Under load: answers are flowing (on a busy machine that takes longer than on an idle one).
        deadline = time.monotonic() + 30
        while outcomes["ok"] <= 50 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(process.popen.pid, signum)
        stdout, stderr = process.popen.communicate(timeout=30)
    finally:
        stop.set()
        for thread in threads:
            thread.join(15)
    return outcomes, problems, (stdout or "") + (stderr or "")
