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

An image is a short prefix, one stream of pickles sharing one memo, then the features body as it is. The
prefix: a mark, the digest of what the engine was compiled from (`evaluation_of`: the compiler's
`evaluation_digest`, zeros when unknown) and where the body starts. The stream: a header (format, version,
evaluator), the engine's own objects (strings, tuples, sets, dicts, the fragment blob) in lists of about
BATCH_BYTES of pickle, then the engine, which refers to what the lists made. Two images with the same
digest answer every toggle request alike however their bodies differ (a flag's description, say): a worker
that has the one keeps its engine and its response cache for the other, and reads only the new body
(`features_body_of`). The digest is of the document, not of the stream: an engine's tables pickle with the
addresses of what they point to, which differ at every compile. Unpickling a list
takes a millisecond or less at 5000 flags, so a worker that serves loads a new image a batch at a time
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
import struct
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import regex

import flagproxy
from flagproxy.evaluator import engine_class

_FORMAT = 4  # prefix, header, lists of objects, engine, the body raw; 3 pickled (engine, body) last
_MARK = b"FPI4"
_PREFIX = struct.Struct("<4s16sQ")  # the mark, the document's evaluation digest, where the body starts
_UNKNOWN = bytes(16)
BATCH_BYTES = 128 * 1024  # of pickle per list of an image's objects (unpickled in well under a millisecond)
SPLIT = 64  # a container of more items is split into its items when an image's objects are batched
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
    evaluation: bytes | None = None  # the digest of what the engine was compiled from (`evaluation_of`)
    # The lists the engine's objects were unpickled in, in order. Held beside the engine, they let whoever
    # replaces it free its objects a list at a time (`release_steps`) instead of all at once when the
    # engine goes (4-10 ms at 5000 flags, every request waiting). A pointer per object: about 1 MiB.
    parts: tuple[list[Any], ...] = ()


def release_steps(parts: list[list[Any]]) -> Generator[None, None, None]:
    """Free what `parts` (a LoadedImage's, its engine dropped already) held, a list per `next()`: the last
    list first, as the containers come after what they hold (`_units`), so each list frees its own objects
    and not those of the lists before it. Empties `parts`."""
    while parts:
        parts.pop()
        yield


class _Reader:
    """A read-only file over an image's bytes: io.BytesIO would copy the whole stream (megabytes at 5000
    flags) in one piece before the first pickle; this copies a pickle frame (64 KiB) per read."""

    def __init__(self, data: memoryview) -> None:
        self._data = data
        self._at = 0

    def read(self, size: int = -1) -> bytes:
        start = self._at
        end = len(self._data) if size < 0 else min(len(self._data), start + size)
        self._at = end
        return bytes(self._data[start:end])

    def readinto(self, buffer: Any) -> int:
        piece = self._data[self._at : self._at + len(buffer)]
        buffer[: len(piece)] = piece
        self._at += len(piece)
        return len(piece)

    def readline(self) -> bytes:  # no opcode of protocol 5 reads lines: only a damaged image gets here
        end = self._at
        while end < len(self._data):
            found = bytes(self._data[end : end + 65536]).find(b"\n")
            if found >= 0:
                return self.read(end + found + 1 - self._at)
            end += 65536
        return self.read()


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
    def __init__(self, file: _Reader, custom_strategies: Sequence[Any]) -> None:
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


def dump_image(
    engine: Any, features_body: bytes, custom_strategies: Sequence[Any] = (), evaluation: bytes | None = None
) -> bytes:
    """The image of a compiled engine and the features body served beside it: pickles in one stream with
    one memo, the header first, then the engine's objects and the body in lists of about BATCH_BYTES of
    pickle (`_units`), then the engine and the body as a tuple, which name what the lists held by their
    memo entries."""
    file = io.BytesIO()
    pickler = _ImagePickler(file, custom_strategies)
    file.write(bytes(_PREFIX.size))
    pickler.dump((_FORMAT, flagproxy.__version__, engine.implementation))
    # An engine reduces to new objects (its tables as bytes, the tuples around them) every time it is
    # pickled: only what two reductions share is the engine's own, and only that can go in a batch.
    first, again = engine.__reduce_ex__(5), engine.__reduce_ex__(5)
    own = {id(unit) for unit in _units(again[1:])}
    units = [unit for unit in _units(first[1:]) if id(unit) in own]
    del first, again
    position, start, per_batch = file.tell(), 0, 64
    while start < len(units):
        batch = units[start : start + per_batch]
        large = next(
            (i for i, unit in enumerate(batch) if type(unit) is bytes and len(unit) > BATCH_BYTES), -1
        )
        if large >= 0:  # a large bytes object (the blob, the body) goes alone: one copy is a step's work
            batch = batch[: large or 1]
        pickler.dump(batch)
        start += len(batch)
        # The next list's length from what this one took: a list of short strings and one of large
        # tuples differ a hundredfold in bytes per unit.
        written, position = file.tell() - position, file.tell()
        per_batch = max(1, min(4 * per_batch, int(per_batch * BATCH_BYTES / max(written, 1))))
    del units
    pickler.dump(engine)
    end = file.tell()
    file.write(features_body)
    file.getbuffer()[: _PREFIX.size] = _PREFIX.pack(_MARK, evaluation or _UNKNOWN, end)
    return file.getvalue()


def evaluation_of(data: bytes | memoryview) -> bytes | None:
    """The digest of what an image's engine was compiled from: equal digests, equal answers to every
    toggle request. None when unknown, or for what is no image of this format."""
    if len(data) < _PREFIX.size or bytes(data[:4]) != _MARK:
        return None
    digest = _PREFIX.unpack_from(data)[1]
    return None if digest == _UNKNOWN else digest


def features_body_of(data: bytes | memoryview) -> bytes:
    """The features body an image carries, without loading its engine (an image of this format)."""
    mark, _, start = _PREFIX.unpack_from(data)
    if mark != _MARK or start > len(data):
        raise ImageError("an unreadable snapshot image: no features body")
    return bytes(memoryview(data)[start:])


def _units(roots: tuple[Any, ...]) -> Iterator[Any]:
    """What an engine's reduction holds, split down to pieces small enough to batch: the reduction's own
    containers (two levels) and any container of more than SPLIT items are opened, everything else is a
    unit the pickler writes whole. Each unit once, children before the containers that hold them."""
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(root, 0) for root in reversed(roots)]
    while stack:
        item, depth = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        kind = type(item)
        if kind in _CONTAINERS and (depth < 2 or len(item) > SPLIT):
            children = (*item.keys(), *item.values()) if kind is dict else tuple(item)
            stack.extend((child, depth + 1) for child in reversed(children))
            continue
        if kind in _NOT_MEMOIZED or (kind in _CONTAINERS and not item):
            continue  # not memoized: nothing to share
        yield item


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
    evaluation = evaluation_of(data)
    stream, features_body = memoryview(data), b""
    if bytes(stream[:4]) == _MARK:  # else another format: its header says which, below
        if _PREFIX.unpack_from(data)[2] > len(data):
            raise ImageError("an unreadable snapshot image: truncated")
        stream, features_body = stream[_PREFIX.size : _PREFIX.unpack_from(data)[2]], features_body_of(data)
    try:
        unpickler = _ImageUnpickler(_Reader(stream), custom_strategies)
        header = unpickler.load()
    except ImageError:
        raise
    except Exception as exc:  # truncated, corrupt or of another layout: all mean "compile instead"
        raise ImageError(f"an unreadable snapshot image: {exc!r}") from exc
    if header != expected:
        made_by = header[0] if isinstance(header, tuple) and len(header) == 3 else header
        raise ImageError(f"a snapshot image made by {made_by!r}, not {expected!r}")
    parts = []
    while True:
        yield
        last = _step(unpickler)
        if type(last) is not list:  # the batches are lists; the engine comes last
            break
        parts.append(last)
    engine = last
    if type(engine) is not engine_class():
        raise ImageError(f"a snapshot image holding {type(engine).__name__}, not {engine_class().__name__}")
    return LoadedImage(engine, features_body, evaluation, tuple(parts))


def _step(unpickler: _ImageUnpickler) -> Any:
    try:
        return unpickler.load()
    except ImageError:
        raise
    except Exception as exc:
        raise ImageError(f"an unreadable snapshot image: {exc!r}") from exc


__all__ = [
    "ImageError",
    "LoadedImage",
    "dump_image",
    "evaluation_of",
    "features_body_of",
    "load_image",
    "load_image_steps",
    "release_steps",
]
