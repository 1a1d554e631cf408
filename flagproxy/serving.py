"""Running a Sanic app in one or N worker processes, for `flagproxy proxy` and `flagproxy server` alike.

One place, so both commands share the fixes for two Sanic 25.12 (the current release) shutdown bugs in
its multi-worker manager, both of which matter for `docker stop` right after a start:

1. The manager waits (up to 30 s, WorkerProcess.THRESHOLD) for every worker to acknowledge its startup
   before it looks at anything else. A SIGTERM/SIGINT during that wait marks the workers terminated, so the
   acknowledgements never come: the process hangs for 30 s and then kills its workers. We end the wait as
   soon as a shutdown has begun.
2. Its signal handler does the whole shutdown itself, including calls on the multiprocessing manager's
   shared worker-state dict. A signal that lands while the main loop is inside such a call sends a second
   request down the same connection; the replies cross (`TypeError: 'list' object is not a mapping`) and
   the process exits 1 or hangs. Our handler only records the signal; the manager's own loop (which wakes
   every 0.1 s) starts the shutdown, so every call on that dict comes from one place at a time.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from sanic import Sanic
from sanic.exceptions import ServerKilled
from sanic.log import logger
from sanic.worker.loader import AppLoader
from sanic.worker.manager import WorkerManager

_PATCHED = "_flagproxy_patched"


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
        signum = getattr(self, "_flagproxy_signal", None)
        if signum is not None and not self._shutting_down:
            begin_shutdown(self, signum, None)

    def all_workers_ack_or_shutting_down(self: WorkerManager) -> bool:
        start_recorded_shutdown(self)
        return bool(self._shutting_down) or all_workers_ack(self)

    def poll_monitor_after_recorded_shutdown(self: WorkerManager) -> Any:
        start_recorded_shutdown(self)
        return poll_monitor(self)

    WorkerManager.shutdown_signal = record_signal  # type: ignore[method-assign]
    WorkerManager._all_workers_ack = all_workers_ack_or_shutting_down  # type: ignore[method-assign]
    WorkerManager._poll_monitor = poll_monitor_after_recorded_shutdown  # type: ignore[method-assign]
    setattr(WorkerManager, _PATCHED, True)


def serve(app: Sanic[Any, Any], loader: AppLoader, workers: int) -> None:
    """Serve a prepared app until SIGINT/SIGTERM; `workers` > 1 runs Sanic's worker manager."""
    if workers == 1:
        Sanic.serve_single(primary=app)
        return
    _make_shutdown_safe()  # before Sanic builds its manager, which installs the signal handlers
    Sanic.serve(primary=app, app_loader=loader)
