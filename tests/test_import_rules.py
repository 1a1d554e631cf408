"""The import rules of ARCHITECTURE.md, read from the source: every import statement of every module,
at module level, under `if TYPE_CHECKING:` or inside a function (a late import is still an edge), with
relative imports resolved against the importing module's package.

- The engine imports no web, database or service code; only instance/store.py reaches it from the HTTP
  side, and the server through flagproxy.snapshot (and the playground's reasons, flagproxy.explain) only.
- The shared layers (http/, instance/, sync/, options.py) import no product (proxy/, edge/, server/);
  proxy/ and edge/ never import each other; the server imports neither.
- No module imports an underscore name from another module of the package, nor an underscore module
  (the evaluators' own, `_eval`, `_eval_py`, `_murmur_py`) from outside the engine.
- No import circles.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "flagproxy"

ENGINE = [
    "snapshot.py", "evaluator.py", "_eval_py.py", "_murmur_py.py", "strategies.py", "compiler", "image.py",
    "explain.py",
]  # fmt: skip
WEB_AND_DATABASE = ["sanic", "sanic_ext", "aiohttp", "psycopg", "psycopg_pool", "sqlite3"]
PRODUCTS = ["flagproxy.proxy", "flagproxy.edge", "flagproxy.server"]
SHARED = ["http", "instance", "sync", "options.py", "tokens.py", "disk.py"]


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    module: str  # the module imported (a submodule when `from package import submodule`)
    name: str | None  # the name taken from `module` by `from module import name`, when not a submodule
    line: int


def _module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _tree(path: pathlib.Path) -> ast.Module:
    if path.suffix == ".pyx":  # Cython: only its Python-level import lines matter here
        lines = [
            line
            for line in path.read_text().splitlines()
            if line.startswith(("import ", "from ")) and " cimport " not in line
        ]
        return ast.parse("\n".join(lines))
    return ast.parse(path.read_text())


def _sources(root: pathlib.Path, package: str) -> dict[str, pathlib.Path]:
    base = root / package
    paths = [*base.rglob("*.py"), *base.rglob("*.pyx")]
    return {_module_name(path, root): path for path in sorted(paths)}


def imports_of(root: pathlib.Path, package: str) -> list[Import]:
    """Every import statement of every module of `package` (a folder in `root`)."""
    sources = _sources(root, package)
    found: list[Import] = []
    for name, path in sources.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                found += [Import(name, alias.name, None, node.lineno) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    # `from . import x` in a/b.py is a.x; in a/__init__.py it is a.x too.
                    anchor = name.split(".")
                    anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    if submodule in sources:
                        found.append(Import(name, submodule, None, node.lineno))
                    else:
                        found.append(Import(name, base, alias.name, node.lineno))
    return found


def cycles(edges: list[Import], package: str) -> list[list[str]]:
    """The import circles among the package's own modules (Tarjan's strongly connected components)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        if edge.module.split(".")[0] == package and edge.module != edge.importer:
            graph.setdefault(edge.importer, set()).add(edge.module)
            graph.setdefault(edge.module, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


EDGES = imports_of(ROOT, "flagproxy")


def _in(module: str, prefixes: list[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _of(*names: str) -> list[str]:
    """Module names of files or folders of the package (`"http"`, `"options.py"`)."""
    return [f"flagproxy.{name.removesuffix('.py').removesuffix('.pyx')}" for name in names]


def _violations(importers: list[str], forbidden: list[str]) -> list[str]:
    return sorted(
        f"{edge.importer} imports {edge.module} (line {edge.line})"
        for edge in EDGES
        if _in(edge.importer, importers) and _in(edge.module, forbidden)
    )


def test_the_engine_imports_no_web_database_or_service_code() -> None:
    forbidden = [*WEB_AND_DATABASE, *PRODUCTS, "flagproxy.sync", "flagproxy.http", "flagproxy.instance"]
    assert _violations([*_of(*ENGINE), "flagproxy._eval"], forbidden) == []


def test_the_shared_layers_import_no_product() -> None:
    assert _violations(_of(*SHARED), PRODUCTS) == []


def test_the_shared_http_layer_stands_on_the_engine_alone() -> None:
    # The layers' order (ARCHITECTURE.md): the instance and sync code may use http/, not the other way.
    assert _violations(_of("http", "options.py", "tokens.py"), ["flagproxy.instance", "flagproxy.sync"]) == []


def test_the_sync_code_serves_nothing() -> None:
    assert _violations(_of("sync"), ["sanic", "flagproxy.http"]) == []


def test_proxy_and_edge_never_import_each_other_nor_the_server() -> None:
    assert _violations(["flagproxy.proxy"], ["flagproxy.edge"]) == []
    assert _violations(["flagproxy.edge"], ["flagproxy.proxy"]) == []
    assert _violations(["flagproxy.proxy", "flagproxy.edge"], ["flagproxy.server"]) == []


def test_the_server_imports_neither_product_and_reaches_the_engine_through_the_snapshot_only() -> None:
    assert _violations(["flagproxy.server"], ["flagproxy.proxy", "flagproxy.edge", "flagproxy.sync"]) == []
    # The frontend API evaluates with compile_snapshot, authoring checks constraint values with the
    # engine's own readers (engine_reads_value), and the playground explains answers with explain.py.
    users = sorted(
        (e.importer, e.module)
        for e in EDGES
        if _in(e.importer, ["flagproxy.server"]) and _in(e.module, [*_of(*ENGINE), "flagproxy._eval"])
    )
    assert users == [
        ("flagproxy.server.authoring", "flagproxy.snapshot"),
        ("flagproxy.server.frontend_snapshots", "flagproxy.snapshot"),
        ("flagproxy.server.routes.playground", "flagproxy.explain"),
    ]


def test_only_the_store_talks_to_the_engine_on_the_http_side() -> None:
    engine = [
        "flagproxy.snapshot",
        "flagproxy.evaluator",
        "flagproxy._eval",
        "flagproxy._eval_py",
        "flagproxy._murmur_py",
        "flagproxy.compiler",
        "flagproxy.image",
    ]
    users = {
        e.importer
        for e in EDGES
        if _in(e.importer, _of("proxy", "edge", "http", "instance")) and _in(e.module, engine)
    }
    assert users == {"flagproxy.instance.store"}


def test_no_module_imports_an_underscore_name_of_another() -> None:
    private = sorted(
        f"{edge.importer} imports {edge.name} from {edge.module} (line {edge.line})"
        for edge in EDGES
        if edge.module.split(".")[0] == "flagproxy"
        and edge.name
        and edge.name.startswith("_")
        and edge.name != "__version__"
    )
    assert private == []


def test_no_module_outside_the_engine_imports_an_underscore_module() -> None:
    engine = [*_of(*ENGINE), "flagproxy._eval"]
    private = sorted(
        f"{edge.importer} imports {edge.module} (line {edge.line})"
        for edge in EDGES
        if edge.module.split(".")[0] == "flagproxy"
        and any(part.startswith("_") and not part.startswith("__") for part in edge.module.split("."))
        and not _in(edge.importer, engine)
    )
    assert private == []


def test_no_import_circles() -> None:
    assert cycles(EDGES, "flagproxy") == []


def _write(root: pathlib.Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _pairs(edges: list[Import]) -> Iterator[tuple[str, str, str | None]]:
    return ((e.importer, e.module, e.name) for e in edges)


def test_the_checker_sees_every_kind_of_import(tmp_path: pathlib.Path) -> None:
    """The rules above are only as good as the import graph: each kind of import statement, in a package
    made for the purpose, must be an edge, and each kind of circle must be found."""
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from . import a\n",
            "pkg/a.py": "import pkg.b\n",  # plain import
            "pkg/b.py": "from pkg.c import thing\n",  # from-import of a name
            "pkg/c.py": "from pkg import d\nthing = 1\n",  # from-import of a submodule
            "pkg/d.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from pkg.sub import e\n"  # type-checking only
                "def late():\n    from .sub.e import _hidden\n"  # late and relative, with a private name
            ),
            "pkg/sub/__init__.py": "",
            "pkg/sub/e.py": "from ..a import x\n_hidden = 1\n",  # relative, two levels up
            "pkg/sub/f.py": "from . import e\nfrom .e import _hidden\n",
            "pkg/x.pyx": "import pkg.a\ncimport cython\n",
        },
    )
    found = set(_pairs(imports_of(tmp_path, "pkg")))
    assert {
        ("pkg", "pkg.a", None),
        ("pkg.a", "pkg.b", None),
        ("pkg.b", "pkg.c", "thing"),
        ("pkg.c", "pkg.d", None),
        ("pkg.d", "pkg.sub.e", None),
        ("pkg.d", "pkg.sub.e", "_hidden"),
        ("pkg.sub.e", "pkg.a", "x"),
        ("pkg.sub.f", "pkg.sub.e", None),
        ("pkg.sub.f", "pkg.sub.e", "_hidden"),
        ("pkg.x", "pkg.a", None),
    } <= found
    # a → b → c → d → (late, relative) sub.e → a: one circle, found through every kind of edge.
    assert cycles(imports_of(tmp_path, "pkg"), "pkg") == [["pkg.a", "pkg.b", "pkg.c", "pkg.d", "pkg.sub.e"]]
    # And the real package's graph is not empty: the rules above read real edges.
    assert ("flagproxy.snapshot", "flagproxy.compiler") in {(e.importer, e.module) for e in EDGES}
    assert ("flagproxy._eval", "orjson") in {(e.importer, e.module) for e in EDGES}
