"""Custom context enrichers (expCustomEnrichers / EXP_CUSTOM_ENRICHERS_FILE).

A Python file defines `enrichers = [callable, ...]`; each takes the context dict and returns the context
to use next (a coroutine function is awaited), in list order, as the Node proxy runs its `async (ctx) =>
ctx` functions. They run after the context is built and before `environment` is forced.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
from collections.abc import Callable, Sequence
from typing import Any

Enricher = Callable[[dict[str, Any]], Any]


class EnricherFileError(ValueError):
    """An enrichers file that cannot be used; the message says why."""


def load_enrichers_file(path: str) -> list[Enricher]:
    if not os.path.isfile(path):
        raise EnricherFileError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location("flagproxy_custom_enrichers", path)
    if spec is None or spec.loader is None:
        raise EnricherFileError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a user's file: any failure becomes one clear start-up line
        raise EnricherFileError(f"{path}: failed to load: {exc.__class__.__name__}: {exc}") from exc
    found = getattr(module, "enrichers", None)
    if not isinstance(found, Sequence) or isinstance(found, str | bytes):
        raise EnricherFileError(f"{path}: must define `enrichers = [...]`, a list of callables")
    for item in found:
        if not callable(item):
            raise EnricherFileError(f"{path}: {item!r} is not callable")
    return list(found)


class EnricherError(RuntimeError):
    """An enricher raised or returned something that is not a context."""


async def enrich(context: dict[str, Any], enrichers: Sequence[Enricher]) -> dict[str, Any]:
    for enricher in enrichers:
        try:
            result = enricher(context)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            raise EnricherError(f"{exc.__class__.__name__}: {exc}") from exc
        if not isinstance(result, dict):
            raise EnricherError(f"enricher {enricher!r} returned {type(result).__name__}, not a context dict")
        context = result
    return context
