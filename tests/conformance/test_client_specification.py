"""Every isEnabled and variant case of the client specification, straight into the engine, for both
evaluators. (tests/http runs them again over HTTP.)"""

from __future__ import annotations

import json

import pytest

from flagproxy.snapshot import Snapshot, compile_snapshot
from tests.conformance.spec_cases import CASES, Case, variant_matches

_snapshots: dict[tuple[str, str], Snapshot] = {}


def _snapshot(case: Case, implementation: str) -> Snapshot:
    key = (case.file, implementation)
    if key not in _snapshots:
        _snapshots[key] = compile_snapshot(case.state, implementation=implementation)
    return _snapshots[key]


def test_the_suite_is_complete() -> None:
    assert sum(not c.is_variant for c in CASES) == 227
    assert sum(c.is_variant for c in CASES) == 52


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case, implementation: str) -> None:
    snapshot = _snapshot(case, implementation)
    context = json.loads(json.dumps(case.context))  # the engine must not depend on the caller's objects
    if case.is_variant:
        actual = snapshot.get_variant(case.toggle, context)
        assert variant_matches(actual, case.expected), (actual, case.expected)
    else:
        assert snapshot.is_enabled(case.toggle, context) is case.expected
