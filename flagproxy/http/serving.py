"""Running a Sanic app in one or N worker processes, for `flagproxy proxy`, `flagproxy edge` and `flagproxy
server` alike.

What a stop does, for every command alike (`docker stop`, systemd, Ctrl-C, right after a start or under
load): SIGTERM or SIGINT, to the main process or to its whole process group, ends every worker after its
open requests and exits 0, without a traceback. Sanic 25.12's (the current release) multi-worker manager
does not give that on its own; the parts here that make it so, each where the code does it:

1. The main process stops waiting for workers' startup acknowledgements once a shutdown has begun (Sanic
   waits up to 30 s, WorkerProcess.THRESHOLD, for acknowledgements a stopping worker never sends).
2. The signal handler only records the signal; the manager's own loop (which wakes every 0.1 s) starts the
   shutdown, so every call on the multiprocessing manager's shared worker-state dict comes from one place
   at a time (Sanic's handler calls it from inside the signal, where replies can cross: `TypeError:
   'list' object is not a mapping`, exit 1 or a hang).
3. The multiprocessing manager process that holds that dict ignores SIGTERM and SIGINT (and dies with the
   main process if that is killed outright), so a signal to the whole group does not take it away under
   the main process; Sanic shuts it down once every worker has stopped.
4. `guard_worker_signals(app)`: a worker signalled twice (the group's SIGTERM, then the manager's SIGINT)
   stops once; the second signal would end the graceful wait with "Event loop stopped before Future
   completed" and cut in-flight requests.
5. `StoppingHttpProtocol` (passed to `app.prepare` by every command) closes a busy keep-alive connection
   between two requests once a stop has begun, so a client that keeps sending cannot hold the stop up to
   GRACEFUL_SHUTDOWN_TIMEOUT.

A worker that dies is replaced (Sanic would go on with one fewer): the manager's loop starts a replacement
for any server worker that exits while no shutdown is under way (at most one start per worker a second, so
a worker that crashes on start cannot spin).

How N workers listen: Sanic binds one socket in the main process and every worker accepts from it; whichever
worker wakes first takes every connection waiting, so a burst of keep-alive connections (a load balancer's
pool, an SDK backend's) lands unevenly: 38 and 12 of 50 in our load benchmark, where the busier worker's
requests wait three times as long. Here every worker listens on its own SO_REUSEPORT socket and the kernel
spreads new connections over them (24/26, 28/22). In paired runs of `post-unique` at 5000 flags that gave
7-11% more requests/s and an 8-15% lower p99. The main process keeps the address bound (without listening, so
the kernel never hands it a connection): a taken port is reported before any worker starts, and no program
that does not set SO_REUSEPORT can take the port meanwhile.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import socket
import threading
import time
from contextlib import suppress
from multiprocessing.managers import SyncManager
from typing import Any

import sanic.mixins.startup
from sanic import Sanic
from sanic.exceptions import ServerKilled
from sanic.http.constants import Stage
from sanic.log import error_logger, logger
from sanic.server.protocols.http_protocol import HttpProtocol
from sanic.worker.loader import AppLoader
from sanic.worker.manager import WorkerManager
from sanic.worker.process import ProcessState

_PATCHED = "_flagproxy_patched"
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
RESTART_SPACING = 1.0  # seconds between two starts of the same worker


def _ignore_stop_signals() -> None:
    """In the manager process: outlive a SIGTERM/SIGINT to the process group, not a killed parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _signal_proof_manager() -> SyncManager:
    """What `multiprocessing.Manager()` makes, with a server process that ignores stop signals."""
    manager = SyncManager(ctx=multiprocessing.get_context())
    manager.start(_ignore_stop_signals)
    return manager


def _restart_dead_workers(manager: WorkerManager) -> None:
    if manager._shutting_down:
        return
    now = time.monotonic()
    for process in list(manager.transient_processes):
        if not process.pid or process.is_alive() or process.state is ProcessState.RESTARTING:
            continue
        starts: dict[str, float] = manager.__dict__.setdefault("_flagproxy_starts", {})
        if now - starts.get(process.name, 0.0) < RESTART_SPACING:
            continue
        starts[process.name] = now
        error_logger.error(
            f"Worker {process.name} [{process.pid}] exited (status {process.exitcode}); starting another"
        )
        process.set_state(ProcessState.FAILED, True)
        manager.restart(process_names=[process.name])


_early_signal: int | None = None


def defer_stop_signals() -> None:
    """Until Sanic's worker manager takes over the signals, remember a SIGTERM/SIGINT instead of dying of
    it (start-up work in the main process, such as the proxy's sync, runs before the manager exists); the
    manager then starts its shutdown at once."""

    def remember(signum: int, frame: Any) -> None:
        global _early_signal
        _early_signal = signum

    signal.signal(signal.SIGTERM, remember)
    signal.signal(signal.SIGINT, remember)


class StoppingHttpProtocol(HttpProtocol):
    """Sanic's HTTP protocol, closing a busy keep-alive connection when a stop begins.

    A stop closes every connection it finds idle; a busy one Sanic leaves open, and its HTTP/1 loop goes on
    serving it for as long as its client keeps sending (keep-alive is decided again from each request), up
    to GRACEFUL_SHUTDOWN_TIMEOUT (15 s): one SDK posting usage without a long pause kept a stopping worker
    answering for all of it. Here such a connection is closed the moment it is between two requests, so
    its client reconnects to a worker that is not stopping.

    An app with hot routes (flagproxy/http/hot_routes.py) has its requests handled by them."""

    def _setup(self) -> None:
        super()._setup()
        hot_routes = getattr(self.app.ctx, "hot_routes", None)
        if hot_routes is not None:
            self.request_handler = hot_routes.handle

    def close_if_idle(self) -> bool:
        if super().close_if_idle():
            return True
        self.loop.create_task(self._close_when_idle())
        return False

    async def _close_when_idle(self) -> None:
        while self.transport is not None and not self.transport.is_closing():
            http = self._http
            if http is None or http.stage is Stage.IDLE:
                self.close()
                return
            await asyncio.sleep(0.002)


def guard_worker_signals(app: Sanic[Any, Any]) -> None:
    """Make a served app stop once, on the first SIGTERM/SIGINT, and ignore those signals afterwards.

    In a worker process this is called by the app factory, before the worker builds its routes: a stop
    signal from then until the worker has started (a stop right after a start) is remembered, and the worker
    stops as soon as it has started, instead of dying of a KeyboardInterrupt traceback in Sanic's start-up."""
    early: list[int] = []
    if os.environ.get("SANIC_WORKER_IDENTIFIER") and threading.current_thread() is threading.main_thread():

        def remember(signum: int, frame: Any) -> None:
            early.append(signum)

        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, remember)

    async def stop_once_on_signal(app: Sanic[Any, Any]) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # served by a test or an embedding program on a loop of its own: no signals here
        loop = asyncio.get_running_loop()
        stopping = False

        def stop() -> None:
            nonlocal stopping
            if not stopping:
                stopping = True
                app.stop(terminate=False)

        for signum in (signal.SIGINT, signal.SIGTERM):
            with suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, stop)  # replaces Sanic's
        if early:
            stop()

    async def ignore_signals_while_stopping(app: Sanic[Any, Any]) -> None:
        # Sanic has just removed the loop's handlers, which restores the defaults (die, KeyboardInterrupt).
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

    app.register_listener(stop_once_on_signal, "after_server_start")
    app.register_listener(ignore_signals_while_stopping, "before_server_stop")


def answer_can_arrive(request: Any) -> bool:
    """Whether the request's connection is still open for its answer. A stop closes every connection it
    finds idle at once; one whose next request had arrived but not been read yet is still handled
    afterwards, and its answer goes nowhere. Usage counted there would arrive upstream while its SDK, told
    nothing, keeps the bucket and sends it again: the routes that take usage count only what they answer."""
    transport = request.transport
    return transport is not None and not transport.is_closing()


def _make_shutdown_safe() -> None:
    if getattr(WorkerManager, _PATCHED, False):
        return
    begin_shutdown = WorkerManager.shutdown_signal  # Sanic's: logs, queues the stop message, terminates
    all_workers_ack = WorkerManager._all_workers_ack
    poll_monitor = WorkerManager._poll_monitor

    def record_signal(self: WorkerManager, signum: int, frame: Any) -> None:
        if getattr(self, "_flagproxy_signal", None) is None and not self._shutting_down:
            self._flagproxy_signal = signum  # type: ignore[attr-defined]
            return
        # A second signal: stop waiting for a graceful end, as Sanic does (killing needs no shared state).
        logger.info("Shutdown interrupted. Killing.")
        with suppress(ServerKilled):
            self.kill()

    def start_recorded_shutdown(self: WorkerManager) -> None:
        signum = getattr(self, "_flagproxy_signal", None) or _early_signal
        if signum is not None and not self._shutting_down:
            begin_shutdown(self, signum, None)

    def all_workers_ack_or_shutting_down(self: WorkerManager) -> bool:
        start_recorded_shutdown(self)
        return bool(self._shutting_down) or all_workers_ack(self)

    def poll_monitor_after_recorded_shutdown(self: WorkerManager) -> Any:
        start_recorded_shutdown(self)
        _restart_dead_workers(self)
        return poll_monitor(self)

    WorkerManager.shutdown_signal = record_signal  # type: ignore[method-assign]
    WorkerManager._all_workers_ack = all_workers_ack_or_shutting_down  # type: ignore[method-assign]
    WorkerManager._poll_monitor = poll_monitor_after_recorded_shutdown  # type: ignore[method-assign]
    sanic.mixins.startup.Manager = _signal_proof_manager  # type: ignore[attr-defined]
    setattr(WorkerManager, _PATCHED, True)


def _listen_in_each_worker() -> None:
    if getattr(sanic.mixins.startup, _PATCHED, False):
        return
    configure_socket = sanic.mixins.startup.configure_socket

    def shared_socket_unless_reuse_port(server_settings: dict[str, Any]) -> socket.SocketType | None:
        if server_settings.get("reuse_port"):
            return None  # no shared socket: each worker binds host:port itself, with SO_REUSEPORT
        return configure_socket(server_settings)

    sanic.mixins.startup.configure_socket = shared_socket_unless_reuse_port
    setattr(sanic.mixins.startup, _PATCHED, True)


def _reserve_address(app: Sanic[Any, Any]) -> socket.socket | None:
    """Bind (without listening) the app's address with SO_REUSEPORT and have every worker listen on its own
    socket there. Raises OSError when the address cannot be bound; None where SO_REUSEPORT does not exist."""
    settings = app.state.server_info[0].settings
    if not hasattr(socket, "SO_REUSEPORT") or settings.get("sock") or settings.get("unix"):
        return None
    host, port = settings["host"], settings["port"]
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    reserved = socket.socket(family, kind, proto)
    try:
        reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        reserved.bind(address)
    except OSError:
        reserved.close()
        raise
    settings["port"] = reserved.getsockname()[1]  # for port 0, the kernel's choice: the same for every worker
    settings["reuse_port"] = True
    _listen_in_each_worker()
    return reserved


def serve(app: Sanic[Any, Any], loader: AppLoader, workers: int) -> None:
    """Serve a prepared app until SIGINT/SIGTERM; `workers` > 1 runs Sanic's worker manager, every worker
    listening on its own SO_REUSEPORT socket."""
    if workers == 1:
        Sanic.serve_single(primary=app)
        return
    defer_stop_signals()
    _make_shutdown_safe()  # before Sanic builds its manager, which installs the signal handlers
    reserved = _reserve_address(app)
    try:
        Sanic.serve(primary=app, app_loader=loader)
    finally:
        if reserved is not None:
            reserved.close()


def cannot_listen(
    host: str, port: int, host_option: str = "PROXY_HOST", port_option: str = "PORT"
) -> str | None:
    """Why a command could not listen there (port in use, unknown host), or None. Sanic would say it with a
    traceback; a later bind can still lose a race, but the common mistakes become one line here."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as error:
        return f"{host_option}: cannot listen on {host!r}: {error.strerror or error}"
    family, kind, proto, _, address = infos[0]
    try:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Sanic binds
            probe.bind(address)
    except OSError as error:
        return f"{port_option}: cannot listen on {host}:{port}: {error.strerror or error}"
    return None
