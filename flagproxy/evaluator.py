"""Chooses the evaluator: the compiled flagproxy._eval unless FLAGPROXY_NO_EXTENSIONS is set (to anything
but "" or "0"), the interpreter is not CPython, or the extension was not built. Nothing else in the package
knows there are two. `IMPLEMENTATION` says which one loaded: "compiled" or "pure".

`CACHE_NEVER` and `CACHE_SNAPSHOT` are the special values of an answer's `valid_in` (flagproxy/snapshot.py).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from flagproxy.compiler.model import CACHE_NEVER, CACHE_SNAPSHOT

NO_EXTENSIONS = os.environ.get("FLAGPROXY_NO_EXTENSIONS", "") not in ("", "0")

if TYPE_CHECKING or NO_EXTENSIONS or sys.implementation.name != "cpython":
    from flagproxy._eval_py import Engine

    IMPLEMENTATION = "pure"
else:
    try:
        from flagproxy._eval import Engine

        IMPLEMENTATION = "compiled"
    except ImportError:  # a pure build: the extension was not compiled
        from flagproxy._eval_py import Engine

        IMPLEMENTATION = "pure"


def engine_class(implementation: str | None = None) -> type[Engine]:
    """The evaluator class by name ("compiled" or "pure"); None gives the one chosen above."""
    if implementation is None:
        return Engine
    if implementation == "pure":
        from flagproxy._eval_py import Engine as PureEngine

        return PureEngine
    if implementation == "compiled":
        from flagproxy._eval import Engine as CompiledEngine

        return CompiledEngine
    raise ValueError(f"unknown evaluator implementation {implementation!r}")


__all__ = ["CACHE_NEVER", "CACHE_SNAPSHOT", "IMPLEMENTATION", "NO_EXTENSIONS", "Engine", "engine_class"]
