"""The import rules of ARCHITECTURE.md (DESIGN.md "Two paths, kept apart"), read from the source."""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "flagproxy"

ENGINE = ["snapshot.py", "evaluator.py", "_eval_py.py", "_murmur_py.py", "strategies.py", "compiler"]
WEB_AND_DATABASE = ["sanic", "sanic_ext", "aiohttp", "psycopg", "psycopg_pool", "sqlite3"]


def _files(*names: str) -> list[pathlib.Path]:
    found = []
    for name in names:
        path = PACKAGE / name
        found.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return found


def _imports(path: pathlib.Path) -> set[str]:
    if path.suffix == ".pyx":  # Cython: only its Python-level import lines matter here
        lines = [
            ln
            for ln in path.read_text().splitlines()
            if ln.startswith(("import ", "from ")) and " cimport " not in ln
        ]
        tree = ast.parse("\n".join(lines))
    else:
        tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _violations(paths: list[pathlib.Path], forbidden: list[str]) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE.parent)} imports {module}"
        for path in paths
        for module in sorted(_imports(path))
        if any(module == f or module.startswith(f + ".") for f in forbidden)
    ]


def test_the_engine_imports_no_web_database_or_service_code() -> None:
    paths = [*_files(*ENGINE), PACKAGE / "_eval.pyx"]
    forbidden = [*WEB_AND_DATABASE, "flagproxy.proxy", "flagproxy.server", "flagproxy.sync"]
    assert _violations(paths, forbidden) == []


def test_the_sync_code_never_imports_the_proxy() -> None:
    assert _violations(_files("sync"), ["flagproxy.proxy", "flagproxy.server", "sanic"]) == []


def test_the_server_shares_only_the_wire_format_and_the_engine_with_the_proxy() -> None:
    # The frontend API evaluates with the engine, through compile_snapshot only.
    forbidden = [
        "flagproxy.proxy",
        "flagproxy.sync",
        "flagproxy.edge",
        "flagproxy.compiler",
        "flagproxy.evaluator",
        "flagproxy._eval",
        "flagproxy._eval_py",
    ]
    assert _violations(_files("server"), forbidden) == []
    # Through flagproxy.snapshot only: the frontend API evaluates with it, and authoring checks constraint
    # values with the engine's own readers (engine_reads_value).
    users = sorted(p.name for p in _files("server") if "flagproxy.snapshot" in _imports(p))
    assert users == ["authoring.py", "frontend_snapshots.py"]


def test_the_proxy_and_the_server_never_import_the_edge() -> None:
    assert _violations(_files("proxy", "sync", "server"), ["flagproxy.edge"]) == []


def test_the_rules_see_real_imports() -> None:
    # The checker itself must find imports, or the tests above would pass on anything.
    assert "flagproxy.compiler" in _imports(PACKAGE / "snapshot.py")
    assert "orjson" in _imports(PACKAGE / "_eval.pyx")
