"""What applying one streamed change costs the serving loop of `flagproxy proxy --streaming --workers 1`.

    python -m benchmarks.apply_cost [--flags 5000] [--changes 20]
    python -m benchmarks.apply_cost --patch [--flags 5000] [--changes 20]

`--patch`: the incremental path alone (flagproxy/compiler/incremental.py), in-process: one `feature-updated`
event applied to the held state and the changed flag compiled and patched into the engine
(`IncrementalEngine.apply`), then what serving the patched engine needs besides (the features body joined by
`DocumentEncoder` and a `ServedSnapshot` with its ETag), each as `time.thread_time` of this thread.

With one worker the sync and the follower share the serving loop. This runs their path for each change on
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
from typing import Any

from benchmarks.datasets import snapshot_payload
from flagproxy.compiler.delta import DeltaState
from flagproxy.compiler.incremental import IncrementalEngine
from flagproxy.instance.compiler import ImageCompiler
from flagproxy.instance.follower import FollowedDocument, install_published, install_published_stepwise
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


async def measure(flags: int, changes: int, folder: str) -> dict[str, list[tuple[float, float]]]:
    payload = snapshot_payload(flags)
    publication = Publication(folder)
    compiler = ImageCompiler((), _Quiet(), apart=lambda: True)
    backup = FileStorageProvider(folder)
    store = SnapshotStore(logger=_Quiet())
    followed = FollowedDocument(
        publication,
        lambda published: install_published(store, published, _Quiet()),
        lambda published: install_published_stepwise(store, published, _Quiet()),
    )
    state, encoder = DeltaState(), DocumentEncoder()
    hydration = [{"eventId": 1, "type": "hydration", **payload}]
    state.apply(hydration)
    encoder.note(hydration)
    document = encoder.document(state)
    compiled = await compiler.compile(document)  # starts the compile process
    publication.publish(document, "upstream", compiled.image)
    followed.load()
    probe = Probe()
    ticking: asyncio.Task[None] | None = None
    results: dict[str, list[tuple[float, float]]] = {"flag switched": [], "description edited": []}
    for i in range(2 * changes):
        if i == changes:  # the second round: held times, with the probe
            ticking = asyncio.get_running_loop().create_task(probe.run())
        for kind in results:
            feature = dict(state.features[payload["features"][i % changes]["name"]])
            if kind == "flag switched":
                feature["enabled"] = not feature.get("enabled")
            else:
                feature["description"] = f"edited {i}"
            await asyncio.sleep(0.2)  # the machine settles; the probe ticks
            probe.reset()
            cpu = time.thread_time()
            events = [{"eventId": 2 + i, "type": "feature-updated", "feature": feature}]
            state.apply(events)
            encoder.note(events)
            document = encoder.document(state)
            compiled = await compiler.compile(document)
            await asyncio.to_thread(publication.publish, document, "upstream", compiled.image)
            await save_document(backup, "bench", document)
            assert await followed.follow()
            cpu = time.thread_time() - cpu
            if i < changes:
                results[kind].append((cpu, 0.0))
            else:
                results[kind][i - changes] = (results[kind][i - changes][0], probe.worst)
    probe.running = False
    if ticking is not None:
        await ticking
    compiler.close()
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
    args = parser.parse_args()
    if args.patch:
        print(f"{args.flags} flags, {args.changes} flags switched, patched in (CPU of this thread)")
        for part, times in measure_patch(args.flags, args.changes).items():
            ms = sorted(t * 1000 for t in times)
            print(f"{part:>14}: median {statistics.median(ms):.2f} ms (min {ms[0]:.2f}, max {ms[-1]:.2f})")
        return
    with tempfile.TemporaryDirectory(prefix="apply-cost-") as folder:
        results = asyncio.run(measure(args.flags, args.changes, folder))
    print(f"{args.flags} flags, {args.changes} changes of each kind, --workers 1 path on one loop")
    for kind, runs in results.items():
        cpu = sorted(run[0] * 1000 for run in runs)
        held = sorted(run[1] * 1000 for run in runs)
        print(
            f"{kind:>20}: loop CPU median {statistics.median(cpu):.1f} ms "
            f"(min {cpu[0]:.1f}, max {cpu[-1]:.1f}); "
            f"longest hold median {statistics.median(held):.1f} ms (max {held[-1]:.1f})"
        )


if __name__ == "__main__":
    main()
