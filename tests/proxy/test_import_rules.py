"""ARCHITECTURE.md's import rules for the proxy side: the sync code never imports the proxy's routes
(it gets callbacks), and the engine is reached through one module of the proxy (store.py)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "flagproxy"


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_sync_never_imports_the_proxy():
    for path in (PACKAGE / "sync").glob("*.py"):
        assert not any(m.startswith("flagproxy.proxy") for m in imported_modules(path)), path.name


def test_only_the_store_talks_to_the_engine():
    engine = ("flagproxy.snapshot", "flagproxy.evaluator", "flagproxy._eval", "flagproxy.compiler")
    users = {
        f"{path.parent.name}/{path.name}"
        for folder in ("proxy", "edge", "http", "instance")
        for path in (PACKAGE / folder).glob("*.py")
        if any(m.startswith(engine) for m in imported_modules(path))
    }
    assert users == {"instance/store.py"}
