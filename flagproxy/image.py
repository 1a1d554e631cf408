"""A compiled snapshot as bytes: built once by an instance's sync, loaded by every worker.

    image = dump_image(snapshot, features_body, custom_strategies)   # the sync, after compile_snapshot
    loaded = load_image(image, custom_strategies)                      # each worker
    loaded.engine.evaluate_all_body(context, False); loaded.features_body

Why: compiling a payload parses it into a tree of dicts, builds the model and then the engine, and frees
all but the engine. The freed objects sat between the kept ones, so Python's small-object arenas stay
mostly empty but cannot be returned: a worker that compiled a 5000-flag payload held about 50 MiB for
14 MiB of live objects, and more after each new snapshot. Loading an image allocates what the engine keeps
and nothing else (the compiled engine pickles as its C tables plus the objects they point to,
Engine.__reduce__ in flagproxy/_eval.pyx), so a worker holds what it uses: benchmarks/README.md has the
figures. It also spares every worker the compile: N workers, one compile.

An image is a pickle, and unpickling can run code, so it is read only from the instance's own folder (owned
by this user, mode 0700: flagproxy/instance/leader.py) and only through `_ImageUnpickler`, which resolves no
name but the engine's own classes and the value types its tables hold. Custom strategies are not pickled:
they travel by name and each worker resolves the name to the object it loaded from the same file; REGEX
patterns travel as their source and flags and are compiled again. An image
made by another version, another evaluator or another build of the compiled one is refused with
`ImageError`; the caller then compiles the document itself.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import regex

import flagproxy
from flagproxy.evaluator import engine_class

_FORMAT = 1
_STRATEGY = "strategy"
_REGEX = "regex"
_PATTERN = type(regex.compile(""))

# Every global an image may name: the engines and their model, and the value types in constraint tables.
_ALLOWED = {
    "flagproxy._eval": {"_engine_from_image"},
    "flagproxy._eval_py": {"Engine"},
    "flagproxy.compiler.model": {"Flag", "Strategy", "Constraint", "VariantList", "Variant", "Dependency"},
    "builtins": {"frozenset", "set", "tuple", "list", "dict", "bytes", "bytearray", "float", "int", "str"},
    "copyreg": {"_reconstructor", "__newobj__"},
    "ipaddress": {"IPv4Network", "IPv6Network", "IPv4Address", "IPv6Address"},
}


class ImageError(ValueError):
    """An image this process cannot use; compile the document instead."""


@dataclass(frozen=True)
class LoadedImage:
    engine: Any
    features_body: bytes


class _ImagePickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, custom_strategies: Sequence[Any]) -> None:
        super().__init__(file, protocol=5)
        self._strategies = {id(strategy): strategy.name for strategy in custom_strategies}

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is _PATTERN:  # as its source: the regex module pickles its internal program
            return (_REGEX, obj.pattern, obj.flags)
        name = self._strategies.get(id(obj))
        return None if name is None else (_STRATEGY, name)


class _ImageUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, custom_strategies: Sequence[Any]) -> None:
        super().__init__(file)
        self._strategies = {strategy.name: strategy for strategy in custom_strategies}

    def find_class(self, module: str, name: str) -> Any:
        if name in _ALLOWED.get(module, ()):
            return super().find_class(module, name)
        raise ImageError(f"a snapshot image naming {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        if pid[0] == _REGEX:
            return regex.compile(pid[1], pid[2])
        kind, name = pid
        if kind != _STRATEGY or name not in self._strategies:
            raise ImageError(f"a snapshot image using the custom strategy {name!r}, which this worker lacks")
        return self._strategies[name]


def dump_image(engine: Any, features_body: bytes, custom_strategies: Sequence[Any] = ()) -> bytes:
    """The image of a compiled engine and the features body served beside it."""
    file = io.BytesIO()
    header = (_FORMAT, flagproxy.__version__, engine.implementation)
    _ImagePickler(file, custom_strategies).dump((header, engine, features_body))
    return file.getvalue()


def load_image(data: bytes | memoryview, custom_strategies: Sequence[Any] = ()) -> LoadedImage:
    """The engine and features body of an image; ImageError if this process cannot use it."""
    expected = (_FORMAT, flagproxy.__version__, engine_class().implementation)
    try:
        header, engine, features_body = _ImageUnpickler(io.BytesIO(data), custom_strategies).load()
    except ImageError:
        raise
    except Exception as exc:  # truncated, corrupt or of another layout: all mean "compile instead"
        raise ImageError(f"an unreadable snapshot image: {exc!r}") from exc
    if header != expected or type(engine) is not engine_class() or not isinstance(features_body, bytes):
        raise ImageError(f"a snapshot image made by {header!r}, not {expected!r}")
    return LoadedImage(engine, features_body)


__all__ = ["ImageError", "LoadedImage", "dump_image", "load_image"]
