"""Fixtures shared by every test folder.

`implementation` runs a test once per evaluator, with readable ids ([compiled], [pure]) as multidict's
conftest does. When the compiled extension is not built (a pure build, or FLAGPROXY_NO_EXTENSIONS=1), the
compiled runs are skipped; tests/engine/test_selection.py makes sure that cannot happen unnoticed in CI.
"""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess

import pytest

from flagproxy.evaluator import NO_EXTENSIONS

REPO = pathlib.Path(__file__).resolve().parent.parent


def _shared() -> pathlib.Path:
    """../shared (the specification, the reference material, the client specification) beside the checkout,
    or, for a clone made elsewhere from such a checkout (`git clone . /tmp/fresh`), beside its origin."""
    beside = REPO.parent / "shared"
    if beside.is_dir():
        return beside
    origin = subprocess.run(
        ["git", "-C", str(REPO), "remote", "get-url", "origin"], capture_output=True, text=True
    ).stdout.strip()
    if origin and pathlib.Path(origin).is_dir():
        return pathlib.Path(origin).resolve().parent / "shared"
    return beside  # missing: the tests that read it fail, naming this path


SHARED = _shared()
SPEC_DIR = SHARED / "client-specification"
COMPILED_AVAILABLE = importlib.util.find_spec("flagproxy._eval") is not None

IMPLEMENTATIONS = ["pure"] if NO_EXTENSIONS else ["compiled", "pure"]


@pytest.fixture(params=IMPLEMENTATIONS)
def implementation(request: pytest.FixtureRequest) -> str:
    if request.param == "compiled" and not COMPILED_AVAILABLE:
        # Only a build without the extension gets here; CI builds it, and test_selection.py fails there
        # if the compiled evaluator is not what loads, so this skip cannot hide a missing build.
        pytest.skip("the compiled evaluator is not built")
    return request.param
