"""A streamed state and the engine compiled from it, kept equal event by event: a changed flag is compiled
alone and patched into the engine (`Engine.patched`, flagproxy/_eval.pyx and its pure twin), not the whole
document again.

    held = IncrementalEngine(custom_strategies=..., hostname=...)
    held.apply(events)        # hydration: built whole; anything else: the flags it touched, patched in
    held.engine               # answers as compile_snapshot(held.state.document()).engine does

What an event touches: a `feature-updated` or `feature-removed` its flag (if the state's feature really
changed: DeltaState keeps an equal one); a `segment-updated` or `segment-removed` every flag whose strategies
name that segment id; a flag that comes or goes every flag whose dependencies name it (a dependency points
at its parent's place, -1 when it is missing). A removal moves the flags after it up one place: the engine
points the kept flags' dependencies at their parent's new place itself.

A feature whose edit leaves what a flag is compiled from as it was (`EVALUATED_KEYS`: a description, a
timestamp) keeps the engine: `apply` says False, `state_changed` True, and a server keeps its cached answers.

A patched engine keeps the rows of the flags it replaced (unread): once the flags replaced since the last
whole build outnumber the flags (plus `spare_rows`), the next change builds whole again, so the tables stay
under about twice their size (plus that many flags' rows). A serving loop cannot afford a whole build
(about 1.3 s at 5000 flags): with `whole_builds` False the engine is dropped instead (`engine` None, `apply`
True) and the caller builds it apart, then hands it back with `adopt` (flagproxy/instance/patcher.py).

tests/engine/test_incremental.py holds the answers equal to a whole build of the same state after random
event sequences, for both evaluators.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from flagproxy.compiler.build import EVALUATED_KEYS, build_flags, compile_feature, segment_map
from flagproxy.compiler.delta import DeltaState
from flagproxy.evaluator import engine_class
from flagproxy.strategies import by_name

_MISSING = object()


def _evaluated_alike(before: Any, after: Any) -> bool:
    """Whether two versions of a feature compile alike: their `EVALUATED_KEYS` encode alike, as
    `evaluation_digest` reads them (encoded: `1 == True` in Python, not to the compiler)."""
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return False
    try:
        return _evaluated(before) == _evaluated(after)
    except TypeError:
        return False


def _evaluated(feature: Mapping[str, Any]) -> bytes:
    return orjson.dumps([feature.get(key) for key in EVALUATED_KEYS], option=orjson.OPT_NON_STR_KEYS)


def _uses(feature: Any) -> tuple[frozenset[Any], frozenset[Any]]:
    """The segment ids a feature's strategies name and the flag names its dependencies name (what can
    change its compiled form besides itself). Read loosely: the compiler decides what is valid."""
    segments: set[Any] = set()
    parents: set[Any] = set()
    if not isinstance(feature, Mapping):
        return frozenset(), frozenset()
    for strategy in feature.get("strategies") or ():
        if isinstance(strategy, Mapping) and isinstance(strategy.get("segments"), list | tuple):
            segments.update(s for s in strategy["segments"] if isinstance(s, int | str | float))
    dependencies = feature.get("dependencies")
    if isinstance(dependencies, list | tuple):
        for dependency in dependencies:
            if isinstance(dependency, Mapping) and isinstance(dependency.get("feature"), str):
                parents.add(dependency["feature"])
    return frozenset(segments), frozenset(parents)


class IncrementalEngine:
    """A DeltaState (`state`) and its engine (`engine`, None before the first hydration)."""

    def __init__(
        self,
        *,
        custom_strategies: Sequence[Any] = (),
        hostname: str | None = None,
        implementation: str | None = None,
        logger: Any = None,
        whole_builds: bool = True,
        spare_rows: int = 0,
    ) -> None:
        # Replaced flags allowed besides one per flag before a whole build: a few flags' engine would
        # otherwise be built whole (or, without `whole_builds`, dropped) every few changes.
        self.spare_rows = spare_rows
        self.whole_builds = whole_builds  # False: never build whole here, drop the engine instead
        self.state_changed = False  # whether the last `apply` changed the state (the engine or not)
        self.custom = by_name(custom_strategies)
        self.host = (hostname if hostname is not None else socket.gethostname()).lower()
        self.engine_class = engine_class(implementation)
        self.logger = logger
        self.state = DeltaState()
        self.engine: Any = None
        self.replaced = 0  # flags replaced or removed since the last whole build
        self._segments: dict[int, list[Any]] = {}
        self._uses: dict[str, tuple[frozenset[Any], frozenset[Any]]] = {}
        self._users: dict[Any, set[str]] = {}  # segment id -> flags whose strategies name it
        self._children: dict[Any, set[str]] = {}  # flag name -> flags whose dependencies name it
        self._indexed = False  # whether the three above hold the state's (`_index`)

    def apply(self, events: Iterable[Any]) -> bool:
        """Apply `events` to the state and the engine; whether the engine was replaced (False: nothing
        changed that a flag is compiled from, and the engine is the same object)."""
        events = [event for event in events if isinstance(event, Mapping)]
        if self.engine is None or any(event.get("type") == "hydration" for event in events):
            self.state_changed = self.state.apply(events)
            self._whole()
            return True
        features, segments = self.state.features, self.state.segments
        names, ids, removals = self._touched(events)
        before = {name: features.get(name, _MISSING) for name in names}
        segments_before = {key: segments.get(key, _MISSING) for key in ids}
        self.state_changed = self.state.apply(events)
        changed = {
            name
            for name in names
            if features.get(name, _MISSING) is not before[name]
            and not _evaluated_alike(before[name], features.get(name, _MISSING))
        }
        # A flag removed and added again, even as the same object, has moved last.
        changed.update(name for name in removals if name in features and before[name] is not _MISSING)
        changed_ids = {key for key in ids if segments.get(key, _MISSING) is not segments_before[key]}
        if not changed and not changed_ids:
            return False
        if self.replaced + len(changed) > len(self.engine.names) + self.spare_rows:
            self._whole()
            return True
        return self._patch(changed, changed_ids, before, bool(removals & changed))

    @staticmethod
    def _touched(events: list[Mapping[str, Any]]) -> tuple[set[Any], set[Any], set[Any]]:
        """The feature names and segment ids the events name, and the names they remove."""
        names: set[Any] = set()
        ids: set[Any] = set()
        removals: set[Any] = set()
        for event in events:
            kind = event.get("type")
            if kind == "feature-updated" and isinstance(event.get("feature"), Mapping):
                names.add(event["feature"].get("name"))
            elif kind == "feature-removed" and isinstance(event.get("featureName"), str):
                names.add(event["featureName"])
                removals.add(event["featureName"])
            elif kind == "segment-updated" and isinstance(event.get("segment"), Mapping):
                ids.add(event["segment"].get("id"))
            elif kind == "segment-removed":
                ids.add(event.get("segmentId"))
        return names, ids, removals

    def _patch(
        self, changed: set[Any], changed_ids: set[Any], before: Mapping[Any, Any], moved: bool
    ) -> bool:
        features = self.state.features
        if changed_ids:
            self._segments = segment_map(list(self.state.segments.values()))
        recompile = {name for name in changed if isinstance(name, str) and name in features}
        came_or_went = [name for name in changed if (before[name] is _MISSING) != (name not in features)]
        if self._indexed:
            for name in changed:
                self._note_uses(name, features.get(name, _MISSING))
        elif changed_ids or came_or_went:
            self._index()  # from the state as it is now, these changes in it
        for key in changed_ids:
            recompile.update(self._users.get(key, ()))
        for name in came_or_went:
            recompile.update(self._children.get(name, ()))
            moved = True
        if moved:  # a removal and a re-addition in one batch also moves the flag last: walk the state
            order = tuple(name for name in features if isinstance(name, str))
            index = {name: i for i, name in enumerate(order)}
        else:  # the same flags in the same places (an update keeps its place)
            order, index = self.engine.names, self.engine.index
        compiled = []
        for name in sorted(recompile.intersection(index), key=index.__getitem__):
            flag, warning = compile_feature(
                name, features[name], self._segments, self.custom, self.host, index
            )
            if warning is not None:
                self._warn(warning)
            compiled.append(flag)
        self.engine = self.engine.patched(order, compiled)
        self.replaced += len(compiled) + sum(1 for name in changed if name not in features)
        return True

    def _whole(self) -> None:
        if self.whole_builds:
            self.rebuild()
        else:
            self.engine = None

    def adopt(self, state: DeltaState, engine: Any) -> None:
        """Patch from here on `engine`, built whole apart from this loop from `state` as it is now (the
        image a worker loaded)."""
        self.state, self.engine, self.replaced = state, engine, 0
        self._segments = segment_map(list(state.segments.values()))
        self._indexed = False

    def _index(self) -> None:
        """What each flag uses, walked from the state (about 25 ms at 5000 flags): only once a change needs
        it (a segment's users, a flag's dependants), so that a hydration's first flag update does not pay
        for it; kept up to date from then on."""
        self._uses, self._users, self._children = {}, {}, {}
        for name, feature in self.state.features.items():
            self._note_uses(name, feature)
        self._indexed = True

    def rebuild(self) -> None:
        """Build the engine whole from the state (a hydration, or too many rows replaced)."""
        document = self.state.document()
        flags, warnings = build_flags(document, self.custom, self.host)
        for warning in warnings:
            self._warn(warning)
        self.engine = self.engine_class(flags)
        self.replaced = 0
        self._segments = segment_map(document["segments"])
        self._indexed = False

    def _note_uses(self, name: Any, feature: Any) -> None:
        old_segments, old_parents = self._uses.pop(name, (frozenset(), frozenset()))
        for key in old_segments:
            self._users.get(key, set()).discard(name)
        for parent in old_parents:
            self._children.get(parent, set()).discard(name)
        if feature is _MISSING or not isinstance(name, str):
            return
        segments, parents = self._uses[name] = _uses(feature)
        for key in segments:
            self._users.setdefault(key, set()).add(name)
        for parent in parents:
            self._children.setdefault(parent, set()).add(name)

    def _warn(self, warning: str) -> None:
        if self.logger is not None:
            self.logger.warning(warning)


__all__ = ["IncrementalEngine"]
