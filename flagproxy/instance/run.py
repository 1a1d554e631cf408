"""Running one instance of a serving product (`flagproxy proxy`, `flagproxy edge`): its folder, N worker
processes and, with more than one, the product's leader in the main process.

The folder is created (and checked to be this user's alone) before any process starts, so a folder that
is not ours is one line and exit 2. With `--workers N` (N > 1) a stop signal from then on ends the
start-up cleanly, each worker builds its own app (`worker_app(directory, parent_pid)`, so it loads the
product's settings itself) and follows the leader (`leader(instance)`) that runs in a thread of the main
process from before the first worker until after the last (flagproxy/instance/leader.py). With one worker
its app is the whole instance and leads itself (`parent_pid` None). The folder is removed at the end,
but for the usage counts a leader could not send, which the next instance in the same folder sends.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from flagproxy.instance.leader import Instance, InstanceFolderError, LeaderThread


def serve_instance(
    prog: str,
    directory: str,
    workers: int,
    worker_app: Callable[[str, int | None], Any],
    leader: Callable[[Instance], Any],
    *,
    host: str,
    port: int,
    access_log: bool,
    logger: Any,
    listening: str,
    ssl: Any = None,
) -> int:
    """Serve until stopped; 0 after a clean stop, 2 when the folder is not this user's. `worker_app` must
    pickle (a module-level function, or a partial of one): Sanic hands it to every worker process. `ssl`:
    serve HTTPS, with Sanic's `ssl=` argument (flagproxy/http/tls.py `server_ssl`)."""
    from sanic.worker.loader import AppLoader

    from flagproxy.http.serving import StoppingHttpProtocol, defer_stop_signals
    from flagproxy.http.serving import serve as run_workers

    try:
        instance = Instance.create(directory)  # checked before any process starts: one line if not ours
    except InstanceFolderError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    parent_pid = None
    if workers > 1:
        defer_stop_signals()  # a stop signal from here on ends the start-up cleanly
        parent_pid = os.getpid()
    loader = AppLoader(factory=partial(worker_app, directory, parent_pid))
    app = loader.load()
    if workers > 1:
        # The instance's one leader (upstream sync, usage, what workers ask), in this, the main process.
        LeaderThread(partial(leader, instance), logger).attach(app)
    logger.info(listening)
    app.prepare(
        host=host,
        port=port,
        ssl=ssl,
        workers=workers,
        access_log=access_log,
        motd=False,
        protocol=StoppingHttpProtocol,
        single_process=workers == 1,
    )
    try:
        run_workers(app, loader, workers)
    finally:
        instance.remove()
    return 0
