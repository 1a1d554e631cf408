"""The snapshot store freezes each snapshot out of the garbage collector's full passes (store.py); that is
only safe if a replaced snapshot is freed by reference counting alone, with nothing left for the collector."""

from __future__ import annotations

import gc

from benchmarks.datasets import snapshot_payload
from flagproxy.proxy.store import SnapshotStore


def test_a_replaced_snapshot_leaves_no_cyclic_garbage() -> None:
    store = SnapshotStore()
    gc.unfreeze()
    gc.collect()
    store.install(snapshot_payload(200), "upstream")
    store.install(snapshot_payload(200, seed=2), "upstream")
    gc.unfreeze()  # what was frozen and has since become garbage is visible to the collector again
    assert gc.collect() == 0
