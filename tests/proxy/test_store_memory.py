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
