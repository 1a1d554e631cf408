"""SDK usage, aggregated per environment and sent upstream in bulk (`POST /api/client/metrics/bulk`).

Frontend SDKs (`/api/frontend/client/metrics`), backend SDKs (`/api/client/metrics`) and downstream edges
(`/api/client/metrics/bulk`) all land here, counted per (environment, appName, feature) with their
variants, and registrations per (environment, appName, instanceId). Each interval the counts are cut into
batches whose JSON stays under 95 kB (Edge's bound, under Unleash's 100 kB body limit) and posted with a
client token of their environment. A batch the upstream does not take is put back and goes with the next
send, so a short outage loses nothing; the bounds below keep a long one from growing the memory (what
does not fit is dropped and counted, and said once).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from flagproxy.sync.usage import MAX_VARIANTS, iso_now

BATCH_BYTES = 95 * 1024
MAX_ENTRIES = 50_000  # (environment, app, feature) counts kept while the upstream refuses them
MAX_APPLICATIONS = 5_000
_ENVELOPE = len(b'{"applications":[],"metrics":[]}')

CountKey = tuple[str, str, str]  # environment, appName, featureName


class EdgeMetrics:
    def __init__(self) -> None:
        self.counts: dict[CountKey, list[Any]] = {}  # -> [yes, no, {variant: n}, timestamp]
        self.applications: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.dropped = 0

    def __bool__(self) -> bool:
        return bool(self.counts or self.applications)

    def add_bucket(self, environment: str, app_name: str, toggles: Mapping[str, Mapping[str, Any]]) -> None:
        """A client bucket's `toggles` (checked by flagproxy/proxy/schemas.py: counts are ints >= 0)."""
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
            if len(self.counts) >= MAX_ENTRIES:
                self.dropped += yes + no
                return
            entry = self.counts[key] = [0, 0, {}, timestamp]
        entry[0] += yes
        entry[1] += no
        for variant, n in variants.items():
            if variant in entry[2] or len(entry[2]) < MAX_VARIANTS:
                entry[2][variant] = entry[2].get(variant, 0) + n
            else:
                self.dropped += n

    def register(self, environment: str, application: Mapping[str, Any], connect_via: dict[str, str]) -> None:
        app_name = str(application.get("appName", ""))
        instance_id = str(application.get("instanceId") or "default")
        key = (environment, app_name, instance_id)
        if key not in self.applications and len(self.applications) >= MAX_APPLICATIONS:
            self.dropped += 1
            return
        vias = [v for v in application.get("connectVia") or () if isinstance(v, dict)]
        self.applications[key] = {
            "appName": app_name,
            "instanceId": instance_id,
            "environment": environment,
            "sdkVersion": application.get("sdkVersion"),
            "strategies": [s for s in application.get("strategies") or () if isinstance(s, str)],
            "interval": application.get("interval") if isinstance(application.get("interval"), int) else 0,
            "started": application.get("started") or iso_now(),
            "connectVia": [*vias, connect_via],
        }

    def take(self) -> EdgeMetrics:
        taken = EdgeMetrics()
        taken.counts, self.counts = self.counts, {}
        taken.applications, self.applications = self.applications, {}
        return taken

    def give_back(self, taken: EdgeMetrics) -> None:
        for (environment, app, feature), (yes, no, variants, at) in taken.counts.items():
            self.add(environment, app, feature, yes, no, variants, at)
        for key, application in taken.applications.items():
            self.applications.setdefault(key, application)

    def environments(self) -> set[str]:
        return {key[0] for key in self.counts} | {key[0] for key in self.applications}

    def batches(self, environment: str) -> Iterable[tuple[bytes, EdgeMetrics]]:
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
        held = EdgeMetrics()
        size = _ENVELOPE
        for kind, encoded, key, value in items:
            if size + len(encoded) + 1 > BATCH_BYTES and (batch["applications"] or batch["metrics"]):
                yield _body(batch), held
                batch, held, size = {"applications": [], "metrics": []}, EdgeMetrics(), _ENVELOPE
            batch[kind].append(encoded)
            size += len(encoded) + 1
            (held.applications if kind == "applications" else held.counts)[key] = value
        if batch["applications"] or batch["metrics"]:
            yield _body(batch), held


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
        metrics: EdgeMetrics,
        client_for: Callable[[str], Any],
        *,
        interval_seconds: int,
        logger: Any,
    ) -> None:
        self.metrics = metrics
        self.client_for = client_for  # environment -> UpstreamClient with a token of it, or None
        self.interval_seconds = interval_seconds
        self.logger = logger
        self.posts = 0
        self.trouble: str | None = None

    async def flush(self) -> bool:
        """Send everything counted; True when the upstream took all of it."""
        if self.metrics.dropped:
            self.logger.warn(f"{self.metrics.dropped} usage counts did not fit the metrics bounds; dropped")
            self.metrics.dropped = 0
        taken = self.metrics.take()
        everything_sent = True
        for environment in sorted(taken.environments()):
            client = self.client_for(environment)
            for body, held in list(taken.batches(environment)):
                status = None if client is None else await client.post("client/metrics/bulk", body, None)
                if isinstance(status, int) and 200 <= status < 300:
                    self.posts += 1
                    continue
                everything_sent = False
                self.metrics.give_back(held)
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
    from flagproxy.proxy.errors import ClientError

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
