"""A snapshot: every flag of one upstream payload, compiled once and never changed afterwards.

    snapshot = compile_snapshot(payload)                  # a client API payload (v1, v2) or a delta
    snapshot.is_enabled("my-flag", {"userId": "42"})
    snapshot.get_variant("my-flag", {"userId": "42"})     # {"name", "enabled", "feature_enabled", "payload"?}
    snapshot.evaluate_all({"userId": "42"})               # the toggles the proxy would send, as dicts
    body, valid_in = snapshot.evaluate_all_body(context, include_disabled=False)
    body, valid_in, outcomes = snapshot.evaluate_named_body(context, ["a", "b"])

Swapping snapshots is one reference assignment, so readers never see a half-built one. The body methods are
the evaluator's own bound methods: the proxy's hot path calls straight into the compiled code.
`outcomes` is one (name, enabled, variant name) per requested name, for usage counts.

`valid_in` (an int) says how long the same request would get the same body from this snapshot, so a
response cache knows what it may keep:

- `CACHE_NEVER` (-1, flagproxy.evaluator): never reuse it. The evaluation drew a random number (random
  stickiness, the random fallback of default stickiness, gradualRolloutRandom, a variant without a
  stickiness value) or called a custom strategy.
- `CACHE_SNAPSHOT` (0): valid for as long as this snapshot is the current one.
- a positive N: valid until the wall clock's Unix second (`int(time.time())`) passes N. The evaluation read
  the clock, for a constraint or rollout on a currentTime the context did not give, and nothing random.
  It reads the clock at most once and uses that second throughout, as "now" in text
  ("%Y-%m-%dT%H:%M:%SZ") and as a date. Whatever read the text may change at the next second, so N is
  that second; a date constraint (DATE_AFTER, DATE_BEFORE) keeps its answer until its date passes, so it
  bounds N by the second before that, and one whose date has passed does not bound it at all (time only
  moves forward: a scheduled launch of last year is decided for good, and with nothing else the answer
  is `CACHE_SNAPSHOT`). The nearest bound wins.

Only what an evaluation actually used counts: a rollout that a failing constraint skips, or a currentTime
constraint of a flag that is disabled, does not make the answer uncacheable.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from flagproxy.compiler import apply_delta_events, build_flags, values
from flagproxy.evaluator import engine_class
from flagproxy.strategies import Strategy, by_name

_log = logging.getLogger("flagproxy.snapshot")


class Snapshot:
    __slots__ = (
        "engine",
        "evaluate_all_body",
        "evaluate_named_body",
        "get_variant",
        "implementation",
        "is_enabled",
        "names",
        "payload",
        "state",
        "warnings",
    )

    def __init__(
        self, payload: Mapping[str, Any], state: Mapping[str, Any], engine: Any, warnings: Sequence[str]
    ) -> None:
        self.payload = payload
        # The full features document: the payload itself, or a delta's events applied to an empty state.
        self.state = state
        self.warnings = tuple(warnings)
        self.engine = engine  # what flagproxy/image.py saves for the workers
        self.names: tuple[str, ...] = engine.names
        self.implementation: str = engine.implementation
        self.is_enabled = engine.is_enabled
        self.get_variant = engine.get_variant
        self.evaluate_all_body = engine.evaluate_all_body
        self.evaluate_named_body = engine.evaluate_named_body

    def evaluate_all(
        self, context: Mapping[str, Any], include_disabled: bool = False
    ) -> list[dict[str, Any]]:
        """The toggles of GET /proxy (or /proxy/all with include_disabled) as Python objects."""
        body, _ = self.evaluate_all_body(context, include_disabled)
        return orjson.loads(body)["toggles"]

    def __len__(self) -> int:
        return len(self.names)


def compile_snapshot(
    payload: Mapping[str, Any] | bytes | str,
    *,
    custom_strategies: Sequence[Strategy] = (),
    logger: Any = None,
    hostname: str | None = None,
    implementation: str | None = None,
) -> Snapshot:
    """Compile a client API payload (version 1 or 2, or a delta `{"events": [...]}`) into a Snapshot.

    A flag that cannot be compiled is off and logged as a warning naming it; the rest goes on. Raises
    ValueError only when the payload is not a features document at all. `hostname` overrides the machine's
    name for the applicationHostname strategy; `implementation` ("compiled" or "pure") overrides the
    evaluator choice (tests and benchmarks compare the two).
    """
    if isinstance(payload, bytes | str):
        try:
            payload = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"not a client features document: {exc}") from exc
    if not isinstance(payload, Mapping):
        raise ValueError("not a client features document: expected a JSON object")
    state = payload
    if "features" not in payload and isinstance(payload.get("events"), list):
        state = apply_delta_events(payload["events"])
    flags, warnings = build_flags(state, by_name(custom_strategies), hostname)
    log = logger if logger is not None else _log
    for warning in warnings:
        log.warning(warning)
    return Snapshot(payload, state, engine_class(implementation)(flags), warnings)


def engine_reads_value(operator: str, value: str, case_insensitive: bool = False) -> bool:
    """Whether the evaluators can read `value` for a single-value operator (NUM_*, DATE_*, SEMVER_*,
    REGEX) as they read it when a snapshot compiles: the flag server refuses what they could not, with this
    one definition of each (a constraint they cannot read is false for every context)."""
    family = operator.split("_", 1)[0]
    if family == "NUM":
        return values.is_number_value(value)
    if family == "DATE":
        return values.parse_date(value.strip()) is not None
    if family == "SEMVER":
        return values.semver_key(value.strip()) is not None
    if operator == "REGEX":
        return values.compile_regex(value, case_insensitive) is not None
    return True


__all__ = ["Snapshot", "compile_snapshot", "engine_reads_value"]
