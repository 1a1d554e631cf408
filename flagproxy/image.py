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

An image is one stream of pickles sharing one memo: a header (format, version, evaluator, how many batches),
the engine's own objects (strings, tuples, sets, dicts, the fragment blob) and the features body in batches
of about BATCH_WEIGHT, then the engine and the body, which refer to what the batches made. Unpickling a
batch takes a millisecond or less at 5000 flags, so a worker that serves loads a new image a batch at a time
between requests (`load_image_steps`, flagproxy/instance/follower.py) instead of stopping for all of it
(10-25 ms at 5000 flags).

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
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import regex

import flagproxy
from flagproxy.evaluator import engine_class

_FORMAT = 2  # 2: header, batches, engine (load_image_steps); 1 was one pickle
BATCH_WEIGHT = 4000  # objects and container items per batch of an image (`_batches`)
_CONTAINERS = (tuple, list, dict, frozenset, set)
_NOT_MEMOIZED = (int, float, bool, type(None), type)  # or pickled by name (classes): nothing to share
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
    """The image of a compiled engine and the features body served beside it: pickles in one stream with
    one memo, the header first, then the engine's objects and the body in batches (`_batches`), then the
    engine and the body, which name what the batches held by their memo entries."""
    file = io.BytesIO()
    pickler = _ImagePickler(file, custom_strategies)
    # An engine reduces to new objects (its tables as bytes, the tuples around them) every time it is
    # pickled: only what two reductions share is the engine's own, and only that can go in a batch.
    first, again = engine.__reduce_ex__(5), engine.__reduce_ex__(5)
    own = {id(item) for item in _walk((*again[1:], features_body))}
    batches = list(_batches(_walk((*first[1:], features_body)), own, pickler))
    pickler.dump((_FORMAT, flagproxy.__version__, engine.implementation, len(batches)))
    for batch in batches:
        pickler.dump(batch)
    del first, again, batches
    pickler.dump((engine, features_body))
    return file.getvalue()


def _walk(roots: tuple[Any, ...]) -> Iterator[Any]:
    """Every object under `roots`, each once, children before the containers that hold them (an iterative
    walk: an image nests only a few levels, but its tuples are long)."""
    seen: set[int] = set()
    stack: list[tuple[Any, bool]] = [(item, False) for item in reversed(roots)]
    while stack:
        item, expanded = stack.pop()
        kind = type(item)
        if expanded:
            yield item
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        if kind in _CONTAINERS:
            stack.append((item, True))
            children = (*item.keys(), *item.values()) if kind is dict else tuple(item)
            stack.extend((child, False) for child in reversed(children))
        else:
            yield item


def _batches(objects: Iterator[Any], own: set[int], pickler: _ImagePickler) -> Iterator[list[Any]]:
    """The objects of an image that the pickle memoizes and the engine owns (`own`), in lists of about
    BATCH_WEIGHT: an object, a container's item and a kilobyte of bytes count one. Unpickling one list
    takes about a millisecond at most, so a worker can load an image between requests
    (`load_image_steps`)."""
    batch: list[Any] = []
    weight = 0
    for item in objects:
        kind = type(item)
        if id(item) not in own or kind in _NOT_MEMOIZED or not _memoized(pickler, item):
            continue
        batch.append(item)
        if kind in _CONTAINERS:
            weight += 1 + len(item)
        elif kind is bytes:
            weight += 1 + len(item) // 1024
        else:
            weight += 1
        if weight >= BATCH_WEIGHT:
            yield batch
            batch, weight = [], 0
    if batch:
        yield batch


def _memoized(pickler: _ImagePickler, item: Any) -> bool:
    """Whether pickle keeps `item` in its memo: not an empty container, not what goes by reference (a
    regex, a custom strategy), which would be made again at every mention anyway."""
    if type(item) in _CONTAINERS:
        return bool(item)
    return pickler.persistent_id(item) is None


def load_image(data: bytes | memoryview, custom_strategies: Sequence[Any] = ()) -> LoadedImage:
    """The engine and features body of an image; ImageError if this process cannot use it."""
    steps = load_image_steps(data, custom_strategies)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def load_image_steps(
    data: bytes | memoryview, custom_strategies: Sequence[Any] = ()
) -> Generator[None, None, LoadedImage]:
    """`load_image` one batch at a time: each `next()` unpickles one (about a millisecond at most) and the
    last returns the LoadedImage, so a serving loop can answer requests between them
    (flagproxy/instance/follower.py). Raises ImageError, at the first step for an image of another
    version, evaluator or build."""
    expected = (_FORMAT, flagproxy.__version__, engine_class().implementation)
    try:
        unpickler = _ImageUnpickler(io.BytesIO(data), custom_strategies)
        header = unpickler.load()
    except ImageError:
        raise
    except Exception as exc:  # truncated, corrupt or of another layout: all mean "compile instead"
        raise ImageError(f"an unreadable snapshot image: {exc!r}") from exc
    if not (isinstance(header, tuple) and len(header) == 4 and header[:3] == expected):
        made_by = header[0] if isinstance(header, tuple) and len(header) == 3 else header
        raise ImageError(f"a snapshot image made by {made_by!r}, not {expected!r}")
    for _ in range(header[3]):
        yield
        _step(unpickler)
    yield
    last = _step(unpickler)
    if not (isinstance(last, tuple) and len(last) == 2):
        raise ImageError("an unreadable snapshot image: no engine at its end")
    engine, features_body = last
    if type(engine) is not engine_class() or not isinstance(features_body, bytes):
        raise ImageError(f"a snapshot image holding {type(engine).__name__}, not {engine_class().__name__}")
    return LoadedImage(engine, features_body)


def _step(unpickler: _ImageUnpickler) -> Any:
    try:
        return unpickler.load()
    except ImageError:
        raise
    except Exception as exc:
        raise ImageError(f"an unreadable snapshot image: {exc!r}") from exc


__all__ = ["ImageError", "LoadedImage", "dump_image", "load_image", "load_image_steps"]
