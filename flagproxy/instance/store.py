"""The one place the proxy talks to the engine: compile a payload, keep the current snapshot.

`store.current` is read once per request; installing a new snapshot builds it fully first and then
swaps one reference, so a request sees either the old snapshot or the new one, never a mix. Everything
that does not depend on the request is done once per snapshot: the /proxy/client/features body and its
ETag.

Two ways in: `install(payload)` compiles a document here; `install_image(image)` (or `install_loaded`, once
loaded a batch at a time) loads what the instance's sync compiled once for every worker (`compile_document`
from the upstream's bytes, flagproxy/image.py), which spares each worker the compile and the memory a
compile leaves behind. Workers take the image and fall back to the document.

A served snapshot keeps only what requests use: the engine (through its bound methods), the flag names
and the features body. The payload, the hydrated state and the Snapshot object around them are dropped
once compiled, so the next compile reuses their memory instead of adding to it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from flagproxy.compiler.build import evaluation_digest
from flagproxy.compiler.delta import DeltaState, DocumentEncoder
from flagproxy.compiler.incremental import IncrementalEngine
from flagproxy.evaluator import CACHE_NEVER, CACHE_SNAPSHOT
from flagproxy.http.etag import weak_etag
from flagproxy.image import (
    ImageError,
    LoadedImage,
    dump_image,
    evaluation_of,
    features_body_of,
    load_image,
    load_image_steps,
    release_steps,
)
from flagproxy.snapshot import compile_snapshot
from flagproxy.sync.documents import check_document, flag_count, read_document

# How long an answer stays true (`valid_in`), re-exported for the response cache, and the streamed state and
# its patched engine for the patcher (flagproxy/instance/patcher.py): the store is the proxy's one door to
# the engine.
__all__ = [
    "CACHE_NEVER",
    "CACHE_SNAPSHOT",
    "Compiled",
    "DeltaState",
    "DocumentEncoder",
    "ImageError",
    "IncrementalEngine",
    "LoadedImage",
    "ServedSnapshot",
    "SnapshotStore",
    "compile_document",
    "compile_image",
    "load_image_steps",
    "reads_remote_address_steps",
    "release_steps",
    "return_free_memory",
]


def features_body(state: Mapping[str, Any]) -> bytes:
    """The /proxy/client/features body of a compiled snapshot's state: what server-side SDKs and other
    proxies read. Unlike the Node proxy this keeps `segments`, so a downstream SDK can evaluate segment
    constraints."""
    document: dict[str, Any] = {"version": 2, "features": state.get("features", [])}
    if "segments" in state:
        document["segments"] = state["segments"]
    return orjson.dumps(document)


def compile_image(
    payload: Mapping[str, Any], *, custom_strategies: Sequence[Any] = (), logger: Any = None
) -> bytes:
    """What an instance's sync publishes beside each document: it compiled once, for every worker to load
    (flagproxy/image.py). Raises ValueError, as `install` does, if it is not a features document."""
    check_document(payload)
    evaluation = evaluation_digest(payload)
    snapshot = compile_snapshot(payload, custom_strategies=custom_strategies, logger=logger)
    return dump_image(snapshot.engine, features_body(snapshot.state), custom_strategies, evaluation)


@dataclass(frozen=True)
class Compiled:
    """A features document compiled once for every worker: its image, and how many flags it holds."""

    image: bytes | None  # None: it could not be made; each worker compiles the document itself
    flags: int


def compile_document(
    document: bytes | memoryview, *, custom_strategies: Sequence[Any] = (), logger: Any = None
) -> Compiled:
    """The image of a features document given as the bytes the upstream sent: parsed, checked whole and
    compiled here, so whoever calls this in a process of its own (flagproxy/instance/compiler.py) spares
    the serving process all three. Raises DocumentError for bytes that are no features document, and what
    `compile_snapshot` refuses (ValueError); any other failure leaves the image out, with a warning."""
    payload = read_document(document)
    flags = flag_count(payload)
    try:
        evaluation = evaluation_digest(payload)
        snapshot = compile_snapshot(payload, custom_strategies=custom_strategies, logger=logger)
        del payload
        image = dump_image(snapshot.engine, features_body(snapshot.state), custom_strategies, evaluation)
    except ValueError:
        raise
    except Exception as exc:
        if logger is not None:
            logger.warn(f"The workers compile the features themselves: no image of them ({exc!r})")
        image = None
    return Compiled(image, flags)


REMOTE_ADDRESS = b"remoteAddress"
SCAN_PIECE = 256 * 1024  # of a features body per step of `reads_remote_address_steps`


def reads_remote_address_steps(body: bytes) -> Generator[None, None, bool]:
    """Whether `body` mentions REMOTE_ADDRESS (`ServedSnapshot.reads_remote_address`), SCAN_PIECE bytes per
    `next()`: a serving worker scans a new body between requests (flagproxy/instance/follower.py), where
    the whole 3.7 MB of a 5000-flag body took 1-2 ms in one piece."""
    for start in range(0, len(body), SCAN_PIECE):
        # Each piece reaches into the next by the needle's length less one: a mention across the seam.
        if body.find(REMOTE_ADDRESS, start, start + SCAN_PIECE + len(REMOTE_ADDRESS) - 1) >= 0:
            return True
        yield
    return False


class ServedSnapshot:
    """A compiled engine plus the per-snapshot response parts. `answers` is the same object for every
    snapshot whose engine answers alike (`SnapshotStore.install_unchanged`): what the response cache is
    valid for, so an edit no toggle answer reads (a description) keeps it."""

    __slots__ = (
        "_body",
        "_body_parts",
        "_etag",
        "answers",
        "evaluate_all_body",
        "evaluate_named_body",
        "evaluation",
        "names",
        "parts",
        "reads_remote_address",
        "revision",
        "source",
    )

    def __init__(
        self,
        engine: Any,
        features_body: bytes | list[bytes | memoryview],
        revision: int,
        source: str,
        evaluation: bytes | None = None,
        answers: object | None = None,
        parts: tuple[list[Any], ...] = (),
        reads_remote_address: bool | None = None,
    ) -> None:
        self.parts = parts  # what the engine's objects were loaded in (flagproxy/image.py `release_steps`)
        self.evaluation = evaluation  # the image's digest of the engine (flagproxy/image.py), if known
        self.answers = answers if answers is not None else object()
        self.revision = revision
        self.source = source
        self.names = engine.names
        self.evaluate_all_body = engine.evaluate_all_body
        self.evaluate_named_body = engine.evaluate_named_body
        # The body as bytes, or as the pieces of a streamed state (flagproxy/instance/patcher.py) joined
        # only when asked: a change patched in at 5000 flags would otherwise join and hash 3.7 MB on the
        # serving loop for a body few clients read.
        self._body: bytes | None = None
        self._body_parts: list[bytes | memoryview] | None = None
        self._etag: str | None = None
        if isinstance(features_body, list):
            self._body_parts = features_body
        else:
            self._body = features_body
            self._etag = weak_etag(features_body)
        # Whether an answer can depend on the caller's address (a remoteAddress strategy, constraint or
        # stickiness): if not, the response cache need not key on it. A plain scan of the document is
        # conservative (a flag merely named so also counts) and costs nothing per request.
        if reads_remote_address is None:
            reads_remote_address = REMOTE_ADDRESS in self.features_body
        self.reads_remote_address = reads_remote_address

    @property
    def features_body(self) -> bytes:
        if self._body is None:
            self._body = b"".join(self._body_parts or ())
            self._body_parts = None
        return self._body

    @property
    def features_etag(self) -> str:
        if self._etag is None:
            self._etag = weak_etag(self.features_body)
        return self._etag


def _load_malloc_trim() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


_malloc_trim = _load_malloc_trim()


def return_free_memory() -> None:
    """Give the C allocator's free pages back to the system once a snapshot is swapped in (and again
    once the caller has dropped what it installed from: flagproxy/instance/follower.py).

    Compiling frees the payload and the previous snapshot; glibc keeps what was malloc'd for them (the
    large strings, lists and the engine's tables) unless asked. Without this a worker's RSS crept up with
    every new snapshot (5000 flags: 94 MiB after the first, 116 after the fourth; with it 91, then 101-105,
    steady). Python's own small-object arenas are released by Python when they empty."""
    if _malloc_trim is not None:
        _malloc_trim(0)


def _freeze_long_lived_objects() -> None:
    """Keep the snapshot's objects out of the cyclic garbage collector's full passes.

    A 5000-flag snapshot is some 200,000 tracked objects; every full (oldest-generation) collection walks
    them all — over 100 ms with the worker stalled, every request in flight waiting. They never form cycles
    (a replaced snapshot is freed by reference counting alone; tests/proxy checks it), so moving them to the
    permanent generation loses nothing. The young generations are collected first so that little of what
    is transient gets frozen with them.
    """
    gc.collect(1)
    gc.freeze()


class SnapshotStore:
    def __init__(self, *, custom_strategies: Sequence[Any] = (), logger: Any = None) -> None:
        self.custom_strategies = tuple(custom_strategies)
        self.logger = logger
        self.current: ServedSnapshot | None = None
        self.revision = 0
        self.last_update_ms = 0  # when the flags last changed
        self.last_fetch_ms = 0  # when the upstream was last asked, changed or not

    @property
    def ready(self) -> bool:
        return self.current is not None

    def install(
        self,
        payload: Mapping[str, Any],
        source: str,
        *,
        revision: int | None = None,
        at_ms: int | None = None,
    ) -> ServedSnapshot:
        """Compile and swap in `payload`; raises ValueError (nothing changes) if it is not a features doc.
        `revision` and `at_ms` are the instance's (the sync's) for what it published; by default the
        store counts on its own and uses the time of the install."""
        check_document(payload)
        snapshot = compile_snapshot(payload, custom_strategies=self.custom_strategies, logger=self.logger)
        engine, body = snapshot.engine, features_body(snapshot.state)
        del snapshot, payload
        return self._swap(engine, body, source, revision, at_ms)

    def install_image(
        self, image: bytes | memoryview, source: str, *, revision: int | None = None, at_ms: int | None = None
    ) -> ServedSnapshot:
        """Swap in what the sync compiled (`compile_image`); raises ImageError (nothing changes) if this
        process cannot use it, and the caller installs the document instead."""
        return self.install_loaded(
            load_image(image, self.custom_strategies), source, revision=revision, at_ms=at_ms
        )

    def install_loaded(
        self,
        loaded: LoadedImage,
        source: str,
        *,
        revision: int | None = None,
        at_ms: int | None = None,
        reads_remote_address: bool | None = None,
    ) -> ServedSnapshot:
        """Swap in an image loaded already (step by step: flagproxy/instance/follower.py), its body scanned
        already if `reads_remote_address` is given (`reads_remote_address_steps`)."""
        engine, body, evaluation, parts = loaded.engine, loaded.features_body, loaded.evaluation, loaded.parts
        del loaded
        return self._swap(
            engine, body, source, revision, at_ms, evaluation, None, parts, reads_remote_address
        )

    def install_unchanged(
        self, image: bytes | memoryview, source: str, *, revision: int | None = None, at_ms: int | None = None
    ) -> ServedSnapshot | None:
        """Swap in `image` keeping the served engine, when the image's engine is the served one (equal
        digests: flagproxy/image.py): only its features body is new, and the response cache stays valid
        (`answers`). None, with nothing changed, when the engines differ or are not known to be equal."""
        current = self.current
        evaluation = evaluation_of(image)
        if current is None or evaluation is None or evaluation != current.evaluation:
            return None
        engine = current.evaluate_all_body.__self__
        body = features_body_of(image)
        return self._swap(engine, body, source, revision, at_ms, evaluation, current.answers, current.parts)

    def install_patched(
        self,
        engine: Any,
        body_parts: list[bytes | memoryview],
        source: str,
        *,
        revision: int,
        reads_remote_address: bool,
        same_answers: bool,
    ) -> ServedSnapshot:
        """Swap in an engine patched on this loop (flagproxy/instance/patcher.py) with its features body in
        pieces, joined when first asked. `same_answers`: the engine is the served one (only the body is
        new), and the response cache stays valid. The patched engine shares most of its objects with the
        one it replaces: only the new ones are frozen, and nothing is trimmed here (a walk of the heap)."""
        current = self.current
        answers = current.answers if same_answers and current is not None else None
        self.revision = revision
        served = ServedSnapshot(engine, body_parts, revision, source, None, answers, (), reads_remote_address)
        self.current = served
        if answers is None:
            gc.freeze()
        self.last_update_ms = int(time.time() * 1000)
        self.last_fetch_ms = max(self.last_fetch_ms, self.last_update_ms)
        return served

    def _swap(
        self,
        engine: Any,
        body: bytes,
        source: str,
        revision: int | None,
        at_ms: int | None,
        evaluation: bytes | None = None,
        answers: object | None = None,
        parts: tuple[list[Any], ...] = (),
        reads_remote_address: bool | None = None,
    ) -> ServedSnapshot:
        self.revision = revision if revision is not None else self.revision + 1
        served = ServedSnapshot(
            engine, body, self.revision, source, evaluation, answers, parts, reads_remote_address
        )
        del engine
        self.current = served
        if answers is None:  # a new engine: freeze it, give back what the old one held
            _freeze_long_lived_objects()
            return_free_memory()
        self.last_update_ms = at_ms if at_ms is not None else int(time.time() * 1000)
        self.last_fetch_ms = max(self.last_fetch_ms, self.last_update_ms)
        return served

    def touch(self) -> None:
        """The upstream answered 304: nothing changed, but it was checked."""
        self.last_fetch_ms = int(time.time() * 1000)
