"""The edge instance's one leader and what workers ask it: everything upstream happens here, once.

One per instance, whatever the number of workers (flagproxy/instance/leader.py runs it in the main
process of `--workers N`, and on the app's own loop with one worker):

- online: the upstream sync (flagproxy/edge/sync.py): start-up tokens, one feed per environment and
  project set, published for every worker (flagproxy/edge/feeds.py), revalidation, and the one usage
  stream upstream, fed by every worker's hand-offs (flagproxy/sync/spool.py) before each send;
- offline: the bootstrap file read and reloaded (flagproxy/edge/offline.py), published the same way;
- online, the persistence backend (flagproxy/edge/persistence.py): read before the sync starts, written
  as it says (and last at stop), by the leader alone;
- `revoked` in the instance folder, touched when its revalidation refuses a token: every worker then
  asks it again about the tokens it knows (answered from the cache), so a revoked token stops working on
  every worker at once;
- the channel (flagproxy/instance/channel.py) on which workers ask it about a token they have not seen
  (`validate`: answered from the leader's validation cache, so a new token costs the upstream one
  `/edge/validate` for the whole instance), have a token's scope synced (`follow`, --dynamic), and ask
  for what the backstage routes show (`status`).

`EdgeLink` is the worker's end: it answers TokenValidator's `exchange` as the upstream client does, so a
worker's validation cache (single flight, batches, revalidation) works unchanged, asking the leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Coroutine
from typing import Any

import orjson

from flagproxy.disk import disk_writer
from flagproxy.edge.feeds import Feeds
from flagproxy.edge.offline import OfflineSource
from flagproxy.edge.persistence import FolderPersistence, Persistence
from flagproxy.edge.settings import OFFLINE, EdgeSettings
from flagproxy.edge.tokens import CLIENT
from flagproxy.edge.usage import EdgeUsage
from flagproxy.edge.validation import UpstreamUnavailable
from flagproxy.instance.channel import ChannelServer, ChannelUnavailable, ask, wake_workers
from flagproxy.instance.leader import Instance

READY_CHECK_SECONDS = 0.1  # how often the ready line's task looks whether the instance is ready


class EdgeLeader:
    def __init__(
        self, settings: EdgeSettings, instance: Instance, logger: Any, *, compile_apart: bool = False
    ) -> None:
        self.settings = settings
        self.instance = instance
        self.logger = logger
        self.offline = settings.mode == OFFLINE
        self.persistence = None if self.offline else build_persistence(settings, logger)
        # `compile_apart`: this leader shares its process with a serving loop (flagproxy/edge/app.py).
        self.feeds = Feeds(
            instance.directory,
            logger,
            self.persistence,
            compile_apart=compile_apart,
            kept_events=settings.delta_kept_events,
        )
        self.usage = EdgeUsage()
        self.sync: Any = None
        self.source: OfflineSource | None = None
        if self.offline:
            self.source = OfflineSource(settings, logger)
            self.validator = self.source.validator
        else:
            from flagproxy.edge.sync import EdgeSync  # the HTTP client: the leader's alone

            self.sync = EdgeSync(settings, self.feeds, self.usage, logger, gather_usage=self.gather_usage)
            self.validator = self.sync.validator
            self.validator.on_revoked = self._say_revoked
        self.channel = ChannelServer(instance.channel_path, self.answer, logger)
        self.tasks: list[asyncio.Task[Any]] = []

    def _say_revoked(self) -> None:
        with open(revocations_path(self.instance.directory), "wb"):
            pass
        os.utime(revocations_path(self.instance.directory))
        wake_workers(self.instance.directory)

    def gather_usage(self) -> None:
        self.instance.spool.collect_documents(self.usage.take_handoff)

    @property
    def ready(self) -> bool:
        return self.source.loaded if self.source is not None else bool(self.sync.ready)

    async def start(self) -> None:
        await self.channel.start()
        if self.persistence is not None:
            await self.persistence.load()
            self.tasks.append(asyncio.get_running_loop().create_task(self.persistence.run()))
        if self.sync is not None:
            await self.sync.start()
        if self.source is not None:
            self.source.load(self.feeds)
            self.tasks.append(asyncio.get_running_loop().create_task(self.source.run(self.feeds)))
        self.tasks.append(asyncio.get_running_loop().create_task(self._announce_when_ready()))

    async def _announce_when_ready(self) -> None:
        """One line once the instance is ready (every start-up token validated and every feed hydrated;
        offline: the file loaded), shown at the default log level: where it listens, from what, how many
        flags. Said once per instance, here in the leader, whatever the number of workers."""
        while not self.ready:
            await asyncio.sleep(READY_CHECK_SECONDS)
        s = self.settings
        # With --tls-enable the plain port serves nothing (or only redirects): name the HTTPS one.
        scheme, port = ("https", s.tls_server_port) if s.tls_enable else ("http", s.port)
        where = f"{scheme}://{s.interface}:{port}{s.base_path}"
        source = f"the file {s.bootstrap_file}" if self.offline else f"upstream {s.upstream_url}"
        self.logger.announce(
            f"flagproxy edge is ready at {where}: {sum(self.feeds.flags.values())} flags in "
            f"{len(self.feeds.flags)} environment and project set(s) from {source}"
        )

    async def stop(self) -> None:
        """After every worker has stopped: their last usage is in the spool and goes in the last send;
        what the upstream does not take stays in the spool for the next instance in this folder."""
        await self.channel.stop()
        for task in self.tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.sync is not None:
            await self.sync.stop()
            await disk_writer().drain()  # a gather its last send gave up waiting for is in the usage
            left = self.usage.handoff()
            if left is not None:
                self.instance.spool.hand_off_document(left)
        if self.persistence is not None:
            await self.persistence.persist()  # what the instance knows at its stop, as Edge does
            await self.persistence.close()
        self.feeds.close()  # the compile process, if one was started
        await disk_writer().drain()  # the feeds' last check times are written before the folder goes
        await asyncio.sleep(self.feeds.ahead_of_clock())  # the next run's ids come after this one's

    # ---- what workers ask ---------------------------------------------------------------------------

    async def answer(self, question: dict[str, Any]) -> dict[str, Any]:
        if "validate" in question:
            return await self._validate([str(secret) for secret in question["validate"]])
        if "follow" in question:
            return await self._follow(str(question["follow"]))
        if "status" in question:
            return self._status()
        return {"error": "unknown question"}

    async def _validate(self, secrets: list[str]) -> dict[str, Any]:
        """As the upstream's /edge/validate answers: the valid ones, with their scope."""
        if self.sync is None:
            answers: list[Any] = [self.validator.cached(secret)[1] for secret in secrets]
        else:
            answers = await asyncio.gather(
                *(self.validator.validate(secret) for secret in secrets), return_exceptions=True
            )
        valid = []
        for secret, token in zip(secrets, answers, strict=True):
            if isinstance(token, UpstreamUnavailable):
                return {"status": 503}
            if isinstance(token, BaseException):
                raise token
            if token is not None:
                valid.append(
                    {
                        "token": secret,
                        "type": token.type,
                        "environment": token.environment,
                        "projects": list(token.projects),
                    }
                )
        return {"status": 200, "tokens": valid}

    async def _follow(self, secret: str) -> dict[str, Any]:
        """--dynamic: sync a validated client token's scope and wait for its first fetch."""
        _, token, _ = self.validator.cached(secret)
        if self.sync is None or token is None or token.type != CLIENT:
            return {"following": False}
        await self.sync.dynamic_feed(token, float(self.settings.upstream_request_timeout))
        return {"following": True}

    def _status(self) -> dict[str, Any]:
        sync = self.sync
        return {
            "ready": self.ready,
            "tokens": [token.describe() for token in self.validator.tokens()],
            "tokenRefreshes": [] if sync is None else [feed.describe() for feed in sync.feeds.values()],
            "valid": len(self.validator.known),
            "invalid": len(self.validator.invalid),
            "validations": self.validator.upstream_calls,
            "batchesSent": 0 if sync is None else sync.sender.posts,
            "refused": self.feeds.refused,
            "streamChanges": {} if sync is None else sync.stream_changes(),
        }


def build_persistence(settings: EdgeSettings, logger: Any) -> Persistence | None:
    """The backend the settings name, if any (flagproxy/edge/persistence.py)."""
    if settings.redis is not None:
        from flagproxy.edge.redis_store import RedisPersistence  # the Redis client: the leader's alone

        return RedisPersistence(settings.redis, logger)
    if settings.s3 is not None:
        from flagproxy.edge.s3_store import S3Persistence  # botocore: the leader's alone

        return S3Persistence(settings.s3, logger)
    if settings.backup_folder:
        return FolderPersistence(settings.backup_folder, logger)
    return None


def revocations_path(directory: str) -> str:
    return os.path.join(directory, "revoked")


class Revocations:
    """A worker's watch on the leader's `revoked` file (flagproxy/instance/follower.py calls `load` with the
    feeds' files): when it changes, the worker asks the leader again about every token it knows."""

    def __init__(self, directory: str, revalidate: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        self.path = revocations_path(directory)
        self.revalidate = revalidate
        self.stamp = self._stamp()
        self.task: asyncio.Task[Any] | None = None

    def _stamp(self) -> int | None:
        try:
            return os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            return None

    def load(self) -> bool:
        stamp = self._stamp()
        if stamp != self.stamp and (self.task is None or self.task.done()):
            self.stamp = stamp
            self.task = asyncio.get_running_loop().create_task(self.revalidate())
        return False  # nothing installed


class EdgeLink:
    """A worker's questions to its instance's leader."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self.timeout = timeout

    async def exchange(self, path: str, body: dict[str, Any]) -> tuple[int, bytes] | str:
        """TokenValidator's question (`edge/validate`), asked of the leader instead of the upstream."""
        try:
            answer = await ask(self.path, {"validate": body["tokens"]}, self.timeout)
        except ChannelUnavailable as exc:
            return str(exc)
        return int(answer.get("status", 503)), orjson.dumps({"tokens": answer.get("tokens", [])})

    async def follow(self, secret: str) -> bool:
        with contextlib.suppress(ChannelUnavailable):
            return bool((await ask(self.path, {"follow": secret}, self.timeout)).get("following"))
        return False

    async def status(self) -> dict[str, Any] | None:
        with contextlib.suppress(ChannelUnavailable):
            return await ask(self.path, {"status": True}, self.timeout)
        return None
