"""The snapshot store freezes each snapshot out of the garbage collector's full passes (store.py); that is
only safe if a replaced snapshot is freed by reference counting alone, with nothing left for the collector."""

from __future__ import annotations

import gc

from benchmarks.datasets import snapshot_payload
from flagproxy.instance.store import SnapshotStore


def test_a_replaced_snapshot_leaves_no_cyclic_garbage() -> None:
    store = SnapshotStore()
    gc.unfreeze()
    gc.collect()
    store.install(snapshot_payload(200), "upstream")
    store.install(snapshot_payload(200, seed=2), "upstream")
    gc.unfreeze()  # what was frozen and has since become garbage is visible to the collector again
    assert gc.collect() == 0


def test_a_compiled_engine_keeps_no_model_objects() -> None:
    """The compiled evaluator's tables point only at the values it needs; the compiled model (flags,
    strategies, constraints, variants, with every fragment twice) is freed once they are built, so a
    worker's snapshot costs its tables and not the model besides (benchmarks/README.md: memory)."""
    from flagproxy.compiler import model
    from flagproxy.evaluator import IMPLEMENTATION
    from flagproxy.snapshot import compile_snapshot

    assert IMPLEMENTATION == "compiled"  # the pure twin walks the model by design
    snapshot = compile_snapshot(snapshot_payload(200))
    model_types = (model.Flag, model.Strategy, model.Constraint, model.Variant, model.VariantList)
    engine = snapshot.evaluate_all_body.__self__
    seen, stack, found = set(), [engine], []
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, type):
            continue
        seen.add(id(item))
        if isinstance(item, model_types):
            found.append(item)
        stack.extend(gc.get_referents(item))
    assert len(seen) > 1000 and not found  # it did walk the tables' objects, and met no model object


def test_a_serving_worker_frees_the_replaced_snapshot_a_part_at_a_time() -> None:
    """A worker that serves loads a new image a batch at a time and then frees the snapshot it replaced
    the same way (flagproxy/instance/follower.py `install_published_stepwise`): the loop answers requests
    between the parts. Freed in one piece, its objects went between two turns of the loop (4-10 ms at 5000
    flags, every request waiting). Counted here in memory blocks alive at each turn of the loop."""
    import asyncio
    import sys

    import orjson

    from flagproxy.instance.follower import install_published_stepwise
    from flagproxy.instance.store import compile_document
    from flagproxy.sync.publication import Published

    def published(revision: int, seed: int) -> Published:
        document = orjson.dumps(snapshot_payload(1000, seed=seed))
        image = compile_document(document).image
        return Published(revision, "upstream", revision, document, (revision, revision), image)

    first, second = published(1, 1), published(2, 2)

    async def replace() -> list[int]:
        store = SnapshotStore()
        assert await install_published_stepwise(store, first, None)
        blocks: list[int] = []
        installing = asyncio.create_task(install_published_stepwise(store, second, None))
        while not installing.done():
            blocks.append(sys.getallocatedblocks())
            await asyncio.sleep(0)
        assert installing.result() and store.current is not None and store.current.revision == 2
        blocks.append(sys.getallocatedblocks())
        return blocks

    blocks = asyncio.run(replace())
    peak = blocks.index(max(blocks))  # both snapshots loaded: what comes after is the old one freed
    freed = blocks[peak] - blocks[-1]
    largest = max(before - after for before, after in zip(blocks[peak:-1], blocks[peak + 1 :], strict=True))
    assert freed > 5_000  # the old snapshot's objects did go (about 10,000 blocks at 1000 flags)
    assert largest < freed / 2, (largest, freed)  # in one piece before
