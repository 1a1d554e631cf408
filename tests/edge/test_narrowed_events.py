"""A streamed change's events as a served scope of fewer projects than its feed sees them
(flagproxy/edge/relayed.py `narrower`): what each worker patches into that scope's engine. Through real
processes, tests/demo/test_streaming_upstream.py holds such a scope equal to the server's document after
random admin changes; moving a flag between projects is what only this can drive exactly.
"""

from __future__ import annotations

from flagproxy.compiler.delta import DeltaState
from flagproxy.edge.relayed import narrower


def flag(name: str, project: str) -> dict:
    return {"name": name, "project": project, "enabled": True, "strategies": []}


def test_a_scope_sees_its_projects_flags_and_loses_one_that_moves_out() -> None:
    held = DeltaState({"features": [flag("stays", "default"), flag("leaves", "default")], "segments": []})
    events = [
        {"type": "feature-updated", "feature": flag("stays", "default")},
        {"type": "feature-updated", "feature": flag("leaves", "other")},  # moved out: removed here
        {"type": "feature-updated", "feature": flag("elsewhere", "other")},  # never here: left out
        {"type": "segment-updated", "segment": {"id": 3, "constraints": []}},  # every scope's
        {"type": "feature-removed", "featureName": "gone", "project": "default"},
    ]
    narrowed = narrower(("default",))(held, events)
    assert narrowed == [
        events[0],
        {"type": "feature-removed", "featureName": "leaves"},
        events[3],
        events[4],
    ]
    held.apply(narrowed)
    assert list(held.features) == ["stays"]


def test_within_one_change_a_flag_that_came_in_and_moved_out_is_removed() -> None:
    held = DeltaState()
    events = [
        {"type": "feature-updated", "feature": flag("brief", "default")},
        {"type": "feature-updated", "feature": flag("brief", "other")},
    ]
    narrowed = narrower(("default",))(held, events)
    assert narrowed == [events[0], {"type": "feature-removed", "featureName": "brief"}]
    held.apply(narrowed)
    assert held.features == {}
