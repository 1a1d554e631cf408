"""The instance's one sync (the leader) and the folder it shares with the workers.

One instance of `flagproxy proxy` or `flagproxy edge` has one `Instance` folder and one leader (the
proxy's SyncService, the edge's EdgeLeader), whatever the number of workers:

- `--workers N` (N > 1): the main process runs the leader in a `LeaderThread`, started by Sanic's
  `main_process_start` before any worker is spawned and stopped by `main_process_stop` after every worker
  has finished, so its last usage POST carries every worker's last counts (`attach`). Sanic's worker
  manager restarts a worker that dies (flagproxy/http/serving.py); the main process outlives them all.
- `--workers 1` and create_app() in a program or a test: the same leader runs as a task on the app's
  own loop, beside the same follower a worker runs (flagproxy/proxy/app.py, flagproxy/edge/app.py).

Either way the leader publishes each document into the folder (flagproxy/sync/publication.py) and reads
the workers' usage counts from it (flagproxy/sync/spool.py); workers follow
(flagproxy/instance/follower.py). What a worker must ask the leader (the edge's token validations) goes
over the folder's unix socket (flagproxy/instance/channel.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from typing import Any

from flagproxy.disk import disk_writer
from flagproxy.sync.publication import Publication
from flagproxy.sync.spool import SUFFIX as USAGE_SUFFIX
from flagproxy.sync.spool import UsageSpool


class Instance:
    """The folder one instance's sync and workers share: the published document and the usage spool.

    `flagproxy proxy` uses one folder per app name and port (`instance_directory`), so an instance that
    starts where a killed one left off sends the usage counts that one had not sent yet: a killed main
    process loses at most what its sync had already collected, and nothing is counted twice (collected
    files are deleted). The published document of a former instance is never served: it is removed at
    start (the backup is what makes a restarted proxy ready early). create_app() in a program or a test
    uses a private temporary folder instead.
    """

    def __init__(self, directory: str, *, owned: bool = False, private: bool = False) -> None:
        self.directory = directory
        self.owned = owned  # created by this process, which cleans it up at the end
        self.private = private  # no later instance will look here: removed whole
        self.publication = Publication(directory)
        self.spool = UsageSpool(directory)
        # Where a worker asks the leader (flagproxy/instance/channel.py).
        self.channel_path = os.path.join(directory, "leader.sock")
        # Every process's Prometheus samples (flagproxy/http/series.py): emptied at start, so an
        # instance's counters start from zero.
        self.series_directory = os.path.join(directory, "prometheus")

    @classmethod
    def create(cls, directory: str | None = None) -> Instance:
        if directory is None:
            instance = cls(tempfile.mkdtemp(prefix="flagproxy-instance-"), owned=True, private=True)
        else:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            _make_private(directory)
            instance = cls(directory, owned=True)
            instance._remove_all_but_usage()
        os.makedirs(instance.series_directory, mode=0o700, exist_ok=True)
        return instance

    def _remove_all_but_usage(self) -> None:
        shutil.rmtree(self.series_directory, ignore_errors=True)
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:  # removed already: the one process of `--workers 1` removes it at its stop
            return
        for name in names:
            if not name.endswith(USAGE_SUFFIX):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.directory, name))

    def remove(self) -> None:
        """At the end: usage counts that could not be sent stay for the next instance in this folder."""
        if not self.owned:
            return
        if self.private:
            shutil.rmtree(self.directory, ignore_errors=True)
            return
        self._remove_all_but_usage()
        with contextlib.suppress(OSError):
            os.rmdir(self.directory)  # only when no usage is left in it


class InstanceFolderError(PermissionError):
    """The instance folder is not this user's alone; the message says what to do."""


def _make_private(directory: str) -> None:
    """Workers load what is in the folder, compiled images included (unpickled: flagproxy/image.py), and
    $TMPDIR is shared: a folder another user made, or could write to, is refused or closed first."""
    status = os.lstat(directory)
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid():
        raise InstanceFolderError(
            f"the instance folder {directory} is owned by user {status.st_uid}, not by this user "
            f"({os.geteuid()}), or is not a folder; remove it or set TMPDIR to a folder of your own"
        )
    if stat.S_IMODE(status.st_mode) != 0o700:
        os.chmod(directory, 0o700)


def named_instance_directory(name: str, port: int) -> str:
    """`$TMPDIR/flagproxy-instance-<name>-<port>`: one folder per product's app name and port."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return os.path.join(tempfile.gettempdir(), f"flagproxy-instance-{safe}-{port}")


def stop_sync(sync: Any, instance: Instance) -> Any:
    """Stop `sync` (its last metrics POST included); what the upstream did not take goes back to the
    spool for the next instance in the same folder."""

    async def stop() -> None:
        await sync.stop()
        await disk_writer().drain()  # a gather its last send gave up waiting for is in the collector
        left = sync.collector.take()
        if left is not None:
            instance.spool.hand_off(left)
        await disk_writer().drain()  # the sync's last series and check time are written before exit

    return stop()


class LeaderThread:
    """The leader of a multi-worker instance, on an event loop of its own in the main process.

    `build()` (called on that loop's thread) makes the leader: an object with `async start()`, which
    returns once what workers need first is published (the backup), and `async stop()`, which sends the
    workers' last usage."""

    def __init__(self, build: Callable[[], Any], logger: Any) -> None:
        self.build = build
        self.logger = logger
        self.loop = asyncio.new_event_loop()
        self.leader: Any = None
        self._thread = threading.Thread(target=self._run, name="flagproxy-sync", daemon=True)
        self._started = threading.Event()

    def start(self, timeout: float = 30.0) -> None:
        """Start syncing; returns once the backup (if any) is published, so the first workers start ready."""
        self._thread.start()
        self._started.wait(timeout)

    def attach(self, app: Any) -> None:
        """Run with Sanic's main process: started before the first worker, stopped after the last."""

        @app.main_process_start
        def start_leader(*_: Any) -> None:
            self.start()

        @app.main_process_stop
        def stop_leader(*_: Any) -> None:
            self.stop()  # every worker has finished: their last counts are in the spool

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.leader = self.build()
            self.loop.run_until_complete(self.leader.start())
        except Exception as exc:  # the workers keep serving what was published; say why nothing new comes
            self.logger.error(f"The upstream sync could not start: {exc!r}")
        finally:
            self._started.set()
        self.loop.run_forever()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop polling, send the workers' last usage counts, close the upstream connections."""
        if not self._thread.is_alive():
            return
        if self.leader is not None:
            stopping = asyncio.run_coroutine_threadsafe(self.leader.stop(), self.loop)
            with contextlib.suppress(Exception):
                stopping.result(timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()
