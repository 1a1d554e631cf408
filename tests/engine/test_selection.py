"""Guards against a silent fallback: the compiled evaluator is what loads by default, and
FLAGPROXY_NO_EXTENSIONS switches it off (yarl's test_quoting_c_loaded, frozenlist's re-import test)."""

from __future__ import annotations

import os
import subprocess
import sys

import flagproxy.evaluator as evaluator
from flagproxy.snapshot import compile_snapshot


def _implementation_in_subprocess(env_value: str | None) -> str:
    env = dict(os.environ)
    env.pop("FLAGPROXY_NO_EXTENSIONS", None)
    if env_value is not None:
        env["FLAGPROXY_NO_EXTENSIONS"] = env_value
    code = "import flagproxy.evaluator as e; print(e.IMPLEMENTATION)"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_default_is_what_this_run_asked_for() -> None:
    # CI builds the extension: a missing .so must fail here, not quietly run the pure twin everywhere.
    expected = "pure" if evaluator.NO_EXTENSIONS else "compiled"
    assert expected == evaluator.IMPLEMENTATION
    assert compile_snapshot({"features": []}).implementation == expected


def test_the_compiled_evaluator_loads_by_default() -> None:
    assert _implementation_in_subprocess(None) == "compiled"
    assert _implementation_in_subprocess("0") == "compiled"


def test_the_environment_variable_forces_the_pure_twin() -> None:
    assert _implementation_in_subprocess("1") == "pure"
    assert _implementation_in_subprocess("yes") == "pure"


def test_both_can_be_chosen_explicitly() -> None:
    assert compile_snapshot({"features": []}, implementation="pure").implementation == "pure"
    assert compile_snapshot({"features": []}, implementation="compiled").implementation == "compiled"
