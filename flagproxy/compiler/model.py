"""The compiled form of a snapshot: plain, immutable-by-convention objects with small integer codes.

The pure evaluator walks these objects as they are; the compiled evaluator copies them once per snapshot
into typed Cython classes. The integer codes are the contract between the two: _eval.pyx reads them from
this module at import time, so there is one source for every code.
"""

from __future__ import annotations

from typing import Any

# Context fields. The first six are the standard fields read from the top level of a context; anything
# else is looked up in `properties` by its exact name (evaluation.md section 2.1).
FIELD_USER_ID = 0
FIELD_SESSION_ID = 1
FIELD_ENVIRONMENT = 2
FIELD_APP_NAME = 3
FIELD_CURRENT_TIME = 4
FIELD_REMOTE_ADDRESS = 5
FIELD_PROPERTY = 6
STANDARD_FIELDS = ("userId", "sessionId", "environment", "appName", "currentTime", "remoteAddress")
FIELD_CODES = {name: code for code, name in enumerate(STANDARD_FIELDS)}

# Stickiness of a rollout or a variant list: DEFAULT is userId, then sessionId, then (rollouts only)
# random; the standard fields read themselves; PROPERTY reads properties[name]; RANDOM is always random.
STICKY_DEFAULT = 7
STICKY_RANDOM = 8

# Constraint operators, after compilation.
OP_IN = 0
OP_NOT_IN = 1
OP_STR_STARTS_WITH = 2
OP_STR_ENDS_WITH = 3
OP_STR_CONTAINS = 4
OP_COMPARE = 5  # NUM_*, DATE_*, SEMVER_*: see CMP_* and KIND_*
OP_REGEX = 6
OP_IN_CIDR = 7
OP_FALSE = 8  # a constraint that is false whatever the context, inversion included (SEMVER value "v1...")

# Comparisons and what they compare (the kind comes from the shape of the constraint value).
CMP_EQ = 0
CMP_GT = 1
CMP_GTE = 2
CMP_LT = 3
CMP_LTE = 4
KIND_NUMBER = 0
KIND_DATE = 1
KIND_SEMVER = 2

# Strategy kinds.
STRATEGY_DEFAULT = 0
STRATEGY_USER_WITH_ID = 1
STRATEGY_GRADUAL_USER_ID = 2
STRATEGY_GRADUAL_SESSION_ID = 3
STRATEGY_GRADUAL_RANDOM = 4
STRATEGY_FLEXIBLE_ROLLOUT = 5
STRATEGY_REMOTE_ADDRESS = 6
STRATEGY_CONSTANT = 7  # applicationHostname (decided at compile time) or a parameter that can never match
STRATEGY_CUSTOM = 8
STRATEGY_UNKNOWN = 9  # no built-in or custom strategy of that name: false

# How long an evaluation's answer holds (the second item the body methods return): never cache it (it used
# randomness or a custom strategy), for the whole snapshot, or a positive Unix second N: only until the
# wall clock's second passes N (it read the clock for a missing currentTime; see clock_flip).
CACHE_NEVER = -1
CACHE_SNAPSHOT = 0


def clock_flip(cmp: int, target_ns: Any) -> int:
    """For a date comparison of "now" (a missing currentTime) with `target_ns`: the first Unix second at
    which its answer changes as the clock moves on, or 0 when it can change at any second. Now compares as
    `second * 10**9`, so `now > T` turns true at second T // 10**9 + 1 and `now < T` turns false at
    ceil(T / 10**9); before that second the answer stands, and from it on it never changes again."""
    if not isinstance(target_ns, int):
        return 0
    if cmp in (CMP_GT, CMP_LTE):
        return target_ns // 10**9 + 1
    if cmp in (CMP_GTE, CMP_LT):
        return -(-target_ns // 10**9)
    return 0


NO_VARIANT = ("disabled", None, False)
VARIANT_SEED = 86028157  # Yggdrasil's VARIANT_NORMALIZATION_SEED
MAX_TOTAL_WEIGHT = 0xFFFFFFFF
ROLLOUT_MODULUS = 100


class Constraint:
    """One constraint. `values` holds what the operator needs: a frozenset (IN, NOT_IN), a tuple of
    strings (STR_*, lower-cased when case-insensitive), a comparison target (COMPARE: a float, an int of
    nanoseconds or a semver key), a compiled regex or None for an invalid pattern (REGEX), networks
    (IN_CIDR)."""

    __slots__ = ("case_insensitive", "cmp", "field", "flip", "inverted", "kind", "op", "prop", "values")

    def __init__(
        self,
        field: int,
        prop: str | None,
        op: int,
        values: Any,
        *,
        inverted: bool = False,
        case_insensitive: bool = False,
        cmp: int = CMP_EQ,
        kind: int = KIND_NUMBER,
    ) -> None:
        self.field = field
        self.prop = prop
        self.op = op
        self.values = values
        self.inverted = inverted
        self.case_insensitive = case_insensitive
        self.cmp = cmp
        self.kind = kind
        # For a date compared with now (a missing currentTime): when its answer changes (clock_flip).
        self.flip = clock_flip(cmp, values) if op == OP_COMPARE and kind == KIND_DATE else 0


class Variant:
    """One variant of a list. `overrides` is a tuple of (field, prop, frozenset of values)."""

    __slots__ = ("name", "outcome", "overrides", "weight")

    def __init__(self, name: str, weight: int, overrides: tuple, outcome: int) -> None:
        self.name = name
        self.weight = weight
        self.overrides = overrides
        self.outcome = outcome  # index of this variant's fragment in the flag's enabled fragments


class VariantList:
    """A feature's or a strategy's variants, with how to pick one: the hash group and the stickiness."""

    __slots__ = ("group", "stickiness", "stickiness_prop", "total", "variants")

    def __init__(
        self, variants: tuple[Variant, ...], group: str, stickiness: int, stickiness_prop: str | None
    ):
        self.variants = variants
        self.total = sum(v.weight for v in variants)
        self.group = group
        self.stickiness = stickiness
        self.stickiness_prop = stickiness_prop


class Strategy:
    """One strategy with its own and its segments' constraints, in evaluation order.

    `percentage` is the parsed rollout (or -1 when the parameter is not a plain integer: never matches);
    `group` is the hash group (None: the name of the toggle being evaluated); `ids` is the userIds set;
    `networks` the remoteAddress networks; `constant` the answer of a STRATEGY_CONSTANT; `custom` the
    Strategy object and `parameters` its parameters for STRATEGY_CUSTOM.
    """

    __slots__ = (
        "constant",
        "constraints",
        "custom",
        "group",
        "ids",
        "kind",
        "networks",
        "parameters",
        "percentage",
        "stickiness",
        "stickiness_prop",
        "variants",
    )

    def __init__(self, kind: int) -> None:
        self.kind = kind
        self.constraints: tuple[Constraint, ...] = ()
        self.percentage = -1
        self.group: str | None = None
        self.stickiness = STICKY_DEFAULT
        self.stickiness_prop: str | None = None
        self.ids: frozenset[str] = frozenset()
        self.networks: tuple = ()
        self.constant = False
        self.custom: Any = None
        self.parameters: dict[str, str] = {}
        self.variants: VariantList | None = None


class Dependency:
    """A dependency on a parent flag: `parent` is its index in the snapshot (-1 when it does not exist);
    `variants` None means no variant condition, an empty frozenset means any variant."""

    __slots__ = ("enabled", "parent", "variants")

    def __init__(self, parent: int, enabled: bool, variants: frozenset[str] | None) -> None:
        self.parent = parent
        self.enabled = enabled
        self.variants = variants


class Flag:
    """A compiled flag.

    Fragments are the JSON bytes of every answer the proxy can give for this flag:
    `enabled_list[i]` / `enabled_named[i]` for outcome i when enabled (0 = no variant, then one per
    variant of every list), for the list routes (impressionData as the upstream sent it, omitted when it
    sent none) and for named lookups (impressionData defaults to false); `disabled_all` for /proxy/all and
    `disabled_named` for a named lookup of a disabled flag (both have the Node proxy's own variant shapes).
    """

    __slots__ = (
        "broken",
        "dependencies",
        "disabled_all",
        "disabled_named",
        "enabled",
        "enabled_list",
        "enabled_named",
        "has_strategies",
        "impression_data",
        "name",
        "outcomes",
        "strategies",
        "variants",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.enabled = False
        self.broken = False  # failed to compile: always off (Yggdrasil's whole-toggle failure)
        self.impression_data = False
        self.has_strategies = False
        self.strategies: tuple[Strategy, ...] = ()
        self.variants: VariantList | None = None
        self.dependencies: tuple[Dependency, ...] = ()
        # outcome i: (variant name, payload or None, strategy-level?); outcome 0 is "no variant"
        self.outcomes: list[tuple[str, Any, bool]] = [NO_VARIANT]
        self.enabled_list: list[bytes] = []
        self.enabled_named: list[bytes] = []
        self.disabled_all = b""
        self.disabled_named = b""
