"""SDK usage, aggregated per environment and sent upstream in bulk (`POST /api/client/metrics/bulk`).

Frontend SDKs (`/api/frontend/client/metrics`), backend SDKs (`/api/client/metrics`) and downstream edges
(`/api/client/metrics/bulk`) all land here, counted per (environment, appName, feature) with their
variants, and registrations per (environment, appName, instanceId). Each interval the counts are cut into
batches whose JSON stays under 95 kB (Edge's bound, under Unleash's 100 kB body limit) and posted with a
client token of their environment. A batch the upstream does not take is put back and goes with the next
send, so a short outage loses nothing; the bounds below keep a long one from growing the memory (what
does not fit is dropped and counted, and said once).

Whatever is kept must be something the upstream takes: a batch it refuses for its content is put back and
sent again for ever, and holds back every good count of its environment with it. So a count is kept only
under a non-empty application and flag name (the upstream requires both), counts stop at MAX_COUNT (the
upstream's bound, and what every SDK's JSON writes exactly; past 2^64 they could not even be encoded), and
a registration keeps only fields of the types the upstream reads. A batch the upstream still answers 400
is dropped and said, never retried.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from flagproxy.disk import disk_writer
from flagproxy.sync.usage import MAX_VARIANTS, iso_now

BATCH_BYTES = 95 * 1024
MAX_ENTRIES = 50_000  # (environment, app, feature) counts kept while the upstream refuses them
MAX_APPLICATIONS = 5_000
MAX_COUNT = 2**53 - 1  # a count (yes, no, a variant's) stops here
_ENVELOPE = len(b'{"applications":[],"metrics":[]}')

CountKey = tuple[str, str, str]  # environment, appName, featureName


class EdgeUsage:
    def __init__(self) -> None:
        self.counts: dict[CountKey, list[Any]] = {}  # -> [yes, no, {variant: n}, timestamp]
        self.applications: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.dropped = 0

    def __bool__(self) -> bool:
        return bool(self.counts or self.applications)

    def add_bucket(self, environment: str, app_name: str, toggles: Mapping[str, Mapping[str, Any]]) -> None:
        """A client bucket's `toggles` (checked by flagproxy/http/bodies.py: counts are ints >= 0)."""
        now = iso_now()
        for name, counts in toggles.items():
            self.add(
                environment,
                app_name,
                name,
                counts.get("yes", 0),
                counts.get("no", 0),
                counts.get("variants") or {},
                now,
            )

    def add(
        self,
        environment: str,
        app_name: str,
        feature: str,
        yes: int,
        no: int,
        variants: Mapping[str, int],
        timestamp: str,
    ) -> None:
        key = (environment, app_name, feature)
        entry = self.counts.get(key)
        if entry is None:
            if len(self.counts) >= MAX_ENTRIES or not app_name or not feature:
                self.dropped += yes + no
                return
            entry = self.counts[key] = [0, 0, {}, timestamp]
        entry[0] = self._capped(entry[0], yes)
        entry[1] = self._capped(entry[1], no)
        for variant, n in variants.items():
            if variant in entry[2] or len(entry[2]) < MAX_VARIANTS:
                entry[2][variant] = self._capped(entry[2].get(variant, 0), n)
            else:
                self.dropped += n

    def _capped(self, count: int, more: int) -> int:
        total = count + more
        if total <= MAX_COUNT:
            return total
        self.dropped += total - MAX_COUNT
        return MAX_COUNT

    def register(self, environment: str, application: Mapping[str, Any], connect_via: dict[str, str]) -> None:
        app_name = str(application.get("appName", ""))
        instance_id = str(application.get("instanceId") or "default")
        key = (environment, app_name, instance_id)
        if not app_name or (key not in self.applications and len(self.applications) >= MAX_APPLICATIONS):
            self.dropped += 1
            return
        vias = [v for v in application.get("connectVia") or () if isinstance(v, dict)]
        sdk_version, interval, started = (application.get(k) for k in ("sdkVersion", "interval", "started"))
        self.applications[key] = {
            "appName": app_name,
            "instanceId": instance_id,
            "environment": environment,
            "sdkVersion": sdk_version if isinstance(sdk_version, str) else None,
            "strategies": [s for s in application.get("strategies") or () if isinstance(s, str)],
            "interval": interval if _is_count(interval) else 0,
            "started": started if isinstance(started, str) or _is_count(started) else iso_now(),
            "connectVia": [*vias, connect_via],
        }

    def take(self) -> EdgeUsage:
        taken = EdgeUsage()
        taken.counts, self.counts = self.counts, {}
        taken.applications, self.applications = self.applications, {}
        return taken

    def handoff(self) -> dict[str, Any] | None:
        """What a worker counted since its last hand-off, as the spool carries it to the leader
        (flagproxy/sync/spool.py), and a fresh start; None when there is nothing."""
        if not self and not self.dropped:
            return None
        taken = self.take()
        document = {
            "counts": [[*key, *value] for key, value in taken.counts.items()],
            "applications": [[*key, application] for key, application in taken.applications.items()],
            # Bounded like a count: a post of counts past 2^64 makes `dropped` a number JSON cannot carry,
            # and a hand-off that cannot be written would hold every later count in this worker.
            "dropped": min(self.dropped, MAX_COUNT),
        }
        self.dropped = 0
        return document

    def take_handoff(self, document: dict[str, Any]) -> None:
        """The leader's side: add a worker's hand-off (its bounds apply again here)."""
        for environment, app, feature, yes, no, variants, at in document["counts"]:
            self.add(environment, app, feature, yes, no, variants, at)
        for environment, app, instance, application in document["applications"]:
            key = (environment, app, instance)
            if key in self.applications or len(self.applications) < MAX_APPLICATIONS:
                self.applications[key] = application
            else:
                self.dropped += 1
        self.dropped += document["dropped"]

    def give_back(self, taken: EdgeUsage) -> None:
        for (environment, app, feature), (yes, no, variants, at) in taken.counts.items():
            self.add(environment, app, feature, yes, no, variants, at)
        for key, application in taken.applications.items():
            self.applications.setdefault(key, application)

    def environments(self) -> set[str]:
        return {key[0] for key in self.counts} | {key[0] for key in self.applications}

    def batches(self, environment: str) -> Iterable[tuple[bytes, EdgeUsage]]:
        """This environment's counts as JSON bodies under BATCH_BYTES, each with what it holds (to put
        back if the upstream does not take it)."""
        items: list[tuple[str, bytes, Any, Any]] = []
        for key, application in self.applications.items():
            if key[0] == environment:
                items.append(("applications", orjson.dumps(application), key, application))
        for key, (yes, no, variants, at) in self.counts.items():
            if key[0] == environment:
                metric = {
                    "featureName": key[2],
                    "appName": key[1],
                    "environment": environment,
                    "timestamp": at,
                    "yes": yes,
                    "no": no,
                    "variants": variants,
                }
                items.append(("metrics", orjson.dumps(metric), key, [yes, no, variants, at]))
        batch: dict[str, list[bytes]] = {"applications": [], "metrics": []}
        held = EdgeUsage()
        size = _ENVELOPE
        for kind, encoded, key, value in items:
            if size + len(encoded) + 1 > BATCH_BYTES and (batch["applications"] or batch["metrics"]):
                yield _body(batch), held
                batch, held, size = {"applications": [], "metrics": []}, EdgeUsage(), _ENVELOPE
            batch[kind].append(encoded)
            size += len(encoded) + 1
            (held.applications if kind == "applications" else held.counts)[key] = value
        if batch["applications"] or batch["metrics"]:
            yield _body(batch), held


def _is_count(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _body(batch: dict[str, list[bytes]]) -> bytes:
    return (
        b'{"applications":['
        + b",".join(batch["applications"])
        + b'],"metrics":['
        + b",".join(batch["metrics"])
        + b"]}"
    )


class BulkSender:
    """Every interval: each environment's batches, posted with that environment's token."""

    def __init__(
        self,
        usage: EdgeUsage,
        client_for: Callable[[str], Any],
        *,
        interval_seconds: int,
        logger: Any,
        gather: Callable[[], Any] | None = None,
    ) -> None:
        self.usage = usage
        self.gather = gather  # brings in what the workers handed over, before each send
        self.client_for = client_for  # environment -> UpstreamClient with a token of it, or None
        self.interval_seconds = interval_seconds
        self.logger = logger
        self.posts = 0
        self.trouble: str | None = None

    async def flush(self) -> bool:
        """Send everything counted; True when the upstream took all of it."""
        if self.gather is not None:
            # It reads and deletes the workers' hand-off files: on the writer thread, after the hand-offs
            # this process queued (flagproxy/disk.py: a serving loop never waits on the disk).
            await disk_writer().run(self.gather)
        if self.usage.dropped:
            self.logger.warn(f"{self.usage.dropped} usage counts did not fit the metrics bounds; dropped")
            self.usage.dropped = 0
        taken = self.usage.take()
        everything_sent = True
        for environment in sorted(taken.environments()):
            client = self.client_for(environment)
            for body, held in list(taken.batches(environment)):
                status = None if client is None else await client.post("client/metrics/bulk", body, None)
                if isinstance(status, int) and 200 <= status < 300:
                    self.posts += 1
                    continue
                if status == 400:  # refused for what it holds: sending it again would be refused again
                    lost = sum(yes + no for yes, no, _, _ in held.counts.values())
                    self.logger.warn(
                        f"The upstream refused a usage metrics batch of {environment} (400): "
                        f"{lost} usage counts and {len(held.applications)} registrations dropped"
                    )
                    continue
                everything_sent = False
                self.usage.give_back(held)
                trouble = f"{environment}: {status if status is not None else 'no token for it'}"
                if trouble != self.trouble:
                    self.logger.warn(
                        f"Sending usage metrics upstream failed ({trouble}); kept for the next try"
                    )
                self.trouble = trouble
        if everything_sent:
            self.trouble = None
        return everything_sent

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_seconds)
            try:
                await self.flush()
            except Exception as exc:  # a bug here must not end metrics for good
                self.logger.error(f"Sending usage metrics failed unexpectedly: {exc!r}")


def check_bulk(body: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A `/api/client/metrics/bulk` body: {applications: [...], metrics: [{featureName, appName,
    environment, timestamp, yes, no, variants}]}; ClientError (400) naming the first thing wrong."""
    from flagproxy.http.errors import ClientError

    def bad(path: str, what: str) -> ClientError:
        return ClientError(400, {"error": f"{path}: {what}"})

    if not isinstance(body, dict):
        raise bad("body", "must be an object")
    applications = body.get("applications", [])
    metrics = body.get("metrics", [])
    if not isinstance(applications, list) or not isinstance(metrics, list):
        raise bad("body", "applications and metrics must be arrays")
    for index, application in enumerate(applications):
        if not isinstance(application, dict) or not isinstance(application.get("appName"), str):
            raise bad(f"applications[{index}]", "must be an object with an appName string")
    for index, metric in enumerate(metrics):
        path = f"metrics[{index}]"
        if not isinstance(metric, dict):
            raise bad(path, "must be an object")
        for name in ("featureName", "appName", "timestamp"):
            if not isinstance(metric.get(name), str):
                raise bad(f"{path}.{name}", "must be a string")
        for name in ("yes", "no"):
            value = metric.get(name, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise bad(f"{path}.{name}", "must be a whole number >= 0")
        variants = metric.get("variants") or {}
        if not isinstance(variants, dict) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in variants.values()
        ):
            raise bad(f"{path}.variants", "must map variant names to whole numbers >= 0")
    return applications, metrics
