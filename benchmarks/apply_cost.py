"""What applying one streamed change costs the serving loop of `flagproxy proxy --streaming --workers 1`.

    python -m benchmarks.apply_cost [--flags 5000] [--changes 20]            # as served: patched in
    python -m benchmarks.apply_cost --whole [--flags 5000] [--changes 20]    # published whole (the before)
    python -m benchmarks.apply_cost --relayed [--flags 5000] [--changes 20]  # --workers N: a worker's loop
    python -m benchmarks.apply_cost --edge [--flags 5000] [--changes 20]     # edge --streaming --workers 1
    python -m benchmarks.apply_cost --patch [--flags 5000] [--changes 20]

Default: the path `proxy --streaming --workers 1` takes once it serves the engine built from the streamed
state (flagproxy/instance/patcher.py): the hydration published whole, compiled apart and loaded by the
follower; then per change, on the loop, `ServedPatcher.apply` (the event applied to the state, the flag
compiled alone and patched in), the encoder told, and `ServedPatcher.serve` (the body's pieces, the swap).
Loop CPU per change as `time.thread_time`, then the longest hold of a probe ticking every millisecond.

`--patch`: the incremental path alone (flagproxy/compiler/incremental.py), in-process: one `feature-updated`
event applied to the held state and the changed flag compiled and patched into the engine
(`IncrementalEngine.apply`), then what serving the patched engine needs besides (the features body joined by
`DocumentEncoder` and a `ServedSnapshot` with its ETag), each as `time.thread_time` of this thread.

`--edge`: `flagproxy edge --streaming --workers 1`, whose leader and worker share the serving loop
(flagproxy/edge/relayed.py): per change the leader's `FeedRelay` (the event applied to the stream's state,
the feed's delta log appended, the events file written with the log) and then the worker's `Scopes` (the
events file read in a thread, `RelayedChanges` patching it into the served scope of the feed's token, the
new delta events offered to the worker's streams, none open). Loop CPU is the whole of that; the first
change (the served scope parses the whole revision's document in a thread) is reported apart.

`--whole`: the path every change took before the patcher (and a change still takes while no engine is
adopted). With one worker the sync and the follower share the serving loop. This runs their path for each
change on
one asyncio loop, in-process, with the parts they use: the events applied to the held state
(`DeltaState.apply`), the document's bytes (`DocumentEncoder`), the compile in its own process at nice 10
(`ImageCompiler`, apart), the publication written in a thread, the backup (`save_document`, the file
provider, in a thread), then the follower's install (`FollowedDocument.follow`: the file read in a thread,
the image loaded a batch at a time).

Per change it reports the loop's CPU: `time.thread_time` of the loop's thread from the event to the swap
(the compile process and the threads count elsewhere; nothing else runs on the loop). Then, in a second
round of as many changes with a probe task ticking every millisecond, the longest the probe waited past its
tick: that includes the operating system's preemption and other threads' hold of the GIL, so on a loaded
machine it says more about the machine than about the loop. Two kinds of change: a flag switched (a new
engine, loaded) and a description edited (nothing an answer reads: the engine and the response cache stay,
only the features body is new).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks.datasets import snapshot_payload
from flagproxy.compiler.delta import DeltaState
from flagproxy.compiler.incremental import IncrementalEngine
from flagproxy.edge.feeds import Feeds
from flagproxy.edge.relayed import FeedRelay
from flagproxy.edge.scopes import Scopes
from flagproxy.edge.tokens import ALL_PROJECTS, CLIENT, EdgeToken
from flagproxy.http.delta import Batch, Streams
from flagproxy.instance.compiler import ImageCompiler
from flagproxy.instance.follower import FollowedDocument, install_published, install_published_stepwise
from flagproxy.instance.patcher import PATCHED, ServedPatcher
from flagproxy.instance.relay import EventRelay, RelayedChanges
from flagproxy.instance.store import ServedSnapshot, SnapshotStore
from flagproxy.sync.backup import FileStorageProvider, save_document
from flagproxy.sync.publication import Publication
from flagproxy.sync.stream import DocumentEncoder


class _Quiet:
    def info(self, *args: Any) -> None: ...

    warn = warning = error = info


class Probe:
    """Ticks every millisecond; `worst` is its longest lateness since `reset`."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.running = True

    def reset(self) -> None:
        self.worst = 0.0

    async def run(self) -> None:
        while self.running:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            self.worst = max(self.worst, time.perf_counter() - before - 0.001)


Results = dict[str, list[tuple[float, float]]]


async def _rounds(
    state: DeltaState,
    payload: dict[str, Any],
    changes: int,
    settle: float,
    step: Callable[[list[dict[str, Any]]], Awaitable[None]],
) -> Results:
    """`changes` changes of each kind through `step` (on this loop), loop CPU each; then as many again
    with the probe ticking, their longest hold."""
    flags = len(payload["features"])
    probe = Probe()
    ticking: asyncio.Task[None] | None = None
    results: Results = {"flag switched": [], "description edited": []}
    for i in range(2 * changes):
        if i == changes:  # the second round: held times, with the probe
            ticking = asyncio.get_running_loop().create_task(probe.run())
        for kind in results:
            feature = dict(state.features[payload["features"][(i * 397) % flags]["name"]])
            if kind == "flag switched":
                feature["enabled"] = not feature.get("enabled")
            else:
                feature["description"] = f"edited {i}"
            await asyncio.sleep(settle)  # the machine settles; the probe ticks
            probe.reset()
            cpu = time.thread_time()
            await step([{"eventId": 2 + i, "type": "feature-updated", "feature": feature}])
            cpu = time.thread_time() - cpu
            await asyncio.sleep(0.005)  # the probe sees the hold
            if i < changes:
                results[kind].append((cpu, 0.0))
            else:
                results[kind][i - changes] = (results[kind][i - changes][0], probe.worst)
    probe.running = False
    if ticking is not None:
        await ticking
    return results


def _hydration(payload: dict[str, Any]) -> tuple[DeltaState, DocumentEncoder]:
    """A stream's state and encoder after its hydration of `payload`."""
    state, encoder = DeltaState(), DocumentEncoder()
    hydration = [{"eventId": 1, "type": "hydration", **payload}]
    state.apply(hydration)
    encoder.note(hydration)
    return state, encoder


async def _hydrated(
    flags: int, folder: str, store: SnapshotStore, compiler: ImageCompiler
) -> tuple[dict[str, Any], DeltaState, DocumentEncoder, Publication]:
    """The hydration published whole (compiled apart) into `folder`, its image not yet loaded."""
    payload = snapshot_payload(flags)
    publication = Publication(folder)
    state, encoder = _hydration(payload)
    document = encoder.document(state)
    publication.publish(document, "upstream", (await compiler.compile(document)).image)
    return payload, state, encoder, publication


async def measure(flags: int, changes: int, folder: str) -> Results:
    """Each change published whole: compiled apart, written, backed up, loaded by the follower."""
    compiler = ImageCompiler((), _Quiet(), apart=lambda: True)
    store = SnapshotStore(logger=_Quiet())
    payload, state, encoder, publication = await _hydrated(flags, folder, store, compiler)
    backup = FileStorageProvider(folder)
    followed = FollowedDocument(
        publication,
        lambda published: install_published(store, published, _Quiet()),
        lambda published: install_published_stepwise(store, published, _Quiet()),
    )
    followed.load()

    async def whole(events: list[dict[str, Any]]) -> None:
        state.apply(events)
        encoder.note(events)
        document = encoder.document(state)
        compiled = await compiler.compile(document)
        await asyncio.to_thread(publication.publish, document, "upstream", compiled.image)
        await save_document(backup, "bench", document)
        assert await followed.follow()

    results = await _rounds(state, payload, changes, 0.2, whole)
    compiler.close()
    return results


async def measure_served(flags: int, changes: int, folder: str) -> Results:
    """Each change patched into the served engine (ServedPatcher), after the hydration loaded whole. The
    first change adopts the engine (`IncrementalEngine.adopt`: a walk of every feature, once per
    hydration): reported apart."""
    compiler = ImageCompiler((), _Quiet(), apart=lambda: True)
    store = SnapshotStore(logger=_Quiet())
    payload, state, encoder, publication = await _hydrated(flags, folder, store, compiler)
    compiler.close()
    patcher = ServedPatcher(store, publication, logger=_Quiet())
    patcher.published(state)
    FollowedDocument(publication, lambda published: install_published(store, published, _Quiet())).load()

    async def patched(events: list[dict[str, Any]]) -> None:
        outcome = patcher.apply(state, events)
        encoder.note(events)
        patcher.serve(encoder.parts(state), events)
        assert outcome == PATCHED, outcome

    adopt = time.thread_time()
    await patched([{"eventId": 1, "type": "feature-updated", "feature": {**payload["features"][0], "x": 1}}])
    results = {"first change (adopts)": [(time.thread_time() - adopt, 0.0)]}
    return {**results, **await _rounds(state, payload, changes, 0.05, patched)}


async def _relayed_rounds(
    relay: EventRelay,
    state: DeltaState,
    encoder: DocumentEncoder,
    payload: dict[str, Any],
    changes: int,
    follow: Callable[[], Awaitable[bool]],
    worker_only: bool,
) -> Results:
    """Each change through the leader's `relay` (applied, relayed in its events file) and then the
    worker's `follow` (the file read in a thread, patched in). `worker_only`: the worker's share of the
    loop CPU (with N workers the leader runs in another process), else the whole step (one worker: the
    leader and the worker share the loop). The first change, which parses the base, reported apart."""
    worker_cpu: list[float] = []

    async def relayed_change(events: list[dict[str, Any]]) -> None:
        assert relay.apply(state, events) == PATCHED
        encoder.note(events)
        relay.serve(encoder.parts(state) if relay.serves_body else None, events)  # as the stream does
        worker = time.thread_time()
        assert await follow()
        worker_cpu.append(time.thread_time() - worker)

    described = {**payload["features"][0], "x": 1}
    first = time.thread_time()
    await relayed_change([{"eventId": 1, "type": "feature-updated", "feature": described}])
    first = time.thread_time() - first
    rounds = await _rounds(state, payload, changes, 0.05, relayed_change)
    # The worker's share of each change's loop CPU (the first round's changes).
    workers = {
        kind: [(worker_cpu[1 + 2 * i + k], 0.0) for i in range(changes)] for k, kind in enumerate(rounds)
    }
    if worker_only:
        first = worker_cpu[0]
        for kind in rounds:
            rounds[kind] = [(w[0], r[1]) for w, r in zip(workers[kind], rounds[kind], strict=True)]
        return {"first change (parses the base)": [(first, 0.0)], **rounds}
    parts = {f"{kind}, worker's part": runs for kind, runs in workers.items()}
    return {"first change (parses the base)": [(first, 0.0)], **rounds, **parts}


async def measure_relayed(flags: int, changes: int, folder: str) -> Results:
    """`--workers N`: the leader's EventRelay writes each change to events.json; the time is one worker's
    loop (RelayedChanges through `follow`: the file read in a thread, then parsed and patched in)."""
    compiler = ImageCompiler((), _Quiet(), apart=lambda: True)
    store = SnapshotStore(logger=_Quiet())
    payload, state, encoder, publication = await _hydrated(flags, folder, store, compiler)
    compiler.close()
    relay = EventRelay(publication)
    relay.published(state)
    relayed = RelayedChanges(store, folder, logger=_Quiet())

    def whole(published: Any) -> bool:
        installed = install_published(store, published, _Quiet())
        relayed.based(published)
        return installed

    FollowedDocument(publication, whole).load()
    return await _relayed_rounds(relay, state, encoder, payload, changes, relayed.followed.follow, True)


async def measure_edge(flags: int, changes: int, folder: str) -> Results:
    """`edge --streaming --workers 1`: the leader's FeedRelay (the state applied, the feed's delta log
    appended, its events file written) and the worker's Scopes on the same loop (the events file read in
    a thread, patched into the served scope as scopes.py wires it, the new delta events offered to the
    worker's Streams). The hydration published whole by Feeds first, as a streamed feed's."""
    feeds, feed = Feeds(folder, _Quiet()), ("development", (ALL_PROJECTS,))
    feeds.add_feed(feed)
    relay = FeedRelay(feeds, feed)  # before the hydration: its document says `streamed`
    payload = snapshot_payload(flags)
    state, encoder = _hydration(payload)
    assert feeds.publish(feed, payload)
    feeds.close()
    relay.published(state)
    streams, offered = Streams(10), list[int]()

    def offer(batch: Batch) -> None:
        offered.append(len(batch.events))
        streams.offer(batch)

    scopes = Scopes(folder, _Quiet(), offer)
    for followed in scopes.documents():  # as the worker's follower: the feed's revision and its log
        followed.load()
    served = scopes.serve(EdgeToken("bench", feed[0], feed[1], CLIENT, "validated"))
    assert served is not None
    results = await _relayed_rounds(
        relay, state, encoder, payload, changes, scopes.relays[feed].follow, False
    )
    # Each change reached the served scope at the leader's revision, and its streams as one event.
    assert served.current is not None and served.current.revision == relay.publication.revision
    assert offered == [1] * (1 + 4 * changes), offered
    return results


def measure_patch(flags: int, changes: int) -> dict[str, list[float]]:
    """Per change: the patch (apply + compile one flag + Engine.patched) and the body with its ETag."""
    payload = snapshot_payload(flags)
    held, encoder = IncrementalEngine(logger=_Quiet()), DocumentEncoder()
    hydration = [{"eventId": 1, "type": "hydration", **payload}]
    held.apply(hydration)
    encoder.note(hydration)
    encoder.document(held.state)
    results: dict[str, list[float]] = {"patch": [], "body and ETag": [], "both": []}
    for i in range(changes):
        feature = dict(held.state.features[payload["features"][(i * 397) % flags]["name"]])
        feature["enabled"] = not feature.get("enabled")
        events = [{"eventId": 2 + i, "type": "feature-updated", "feature": feature}]
        cpu = time.thread_time()
        assert held.apply(events)
        patched = time.thread_time()
        encoder.note(events)
        ServedSnapshot(held.engine, encoder.document(held.state), i, "upstream")
        done = time.thread_time()
        results["patch"].append(patched - cpu)
        results["body and ETag"].append(done - patched)
        results["both"].append(done - cpu)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flags", type=int, default=5000)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--patch", action="store_true", help="the incremental patch path alone")
    parser.add_argument("--whole", action="store_true", help="each change published whole (the before)")
    parser.add_argument("--relayed", action="store_true", help="--workers N: leader relays, a worker patches")
    parser.add_argument("--edge", action="store_true", help="edge --streaming --workers 1: relay and scope")
    args = parser.parse_args()
    if args.patch:
        print(f"{args.flags} flags, {args.changes} flags switched, patched in (CPU of this thread)")
        for part, times in measure_patch(args.flags, args.changes).items():
            ms = sorted(t * 1000 for t in times)
            print(f"{part:>14}: median {statistics.median(ms):.2f} ms (min {ms[0]:.2f}, max {ms[-1]:.2f})")
        return
    with tempfile.TemporaryDirectory(prefix="apply-cost-") as folder:
        run = measure if args.whole else measure_relayed if args.relayed else measure_served
        run = measure_edge if args.edge else run
        results = asyncio.run(run(args.flags, args.changes, folder))
    path = "--workers 1, published whole" if args.whole else "--workers 1, patched in"
    path = "--workers N, relayed: a worker's loop" if args.relayed else path
    path = "edge --streaming --workers 1: leader and worker on one loop" if args.edge else path
    print(f"{args.flags} flags, {args.changes} changes of each kind, {path}")
    for kind, runs in results.items():
        cpu = sorted(run[0] * 1000 for run in runs)
        held = sorted(run[1] * 1000 for run in runs)
        print(
            f"{kind:>33}: loop CPU median {statistics.median(cpu):.1f} ms "
            f"(min {cpu[0]:.1f}, max {cpu[-1]:.1f}); "
            f"longest hold median {statistics.median(held):.1f} ms (max {held[-1]:.1f})"
        )


if __name__ == "__main__":
    main()
