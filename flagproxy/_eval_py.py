"""The pure-Python evaluator: the readable reference for flagproxy/_eval.pyx, with the same API.

Semantics are Yggdrasil's (../shared/reference/evaluation.md). One pass per flag finds the first matching
strategy, which decides both whether the flag is on and which variant list is used, so a response is
consistent even when a rollout is random. The compiler (flagproxy/compiler) did everything that does not
depend on the context; this module only reads the context and walks the compiled flags.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from flagproxy._murmur_py import normalized_hash
from flagproxy.compiler import model as m
from flagproxy.compiler import values
from flagproxy.compiler.fragments import BODY_PREFIX, BODY_SUFFIX, unknown_named

_FLOAT_EPSILON = 2.220446049250313e-16
_RANDOM = random.Random()


class Context:
    """An evaluation context, normalised like Yggdrasil's `Context::from_map` (evaluation.md 2.2)."""

    __slots__ = ("cache", "fields", "never", "now", "properties", "second", "until")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        properties: dict[str, str] = {}
        raw_properties = raw.get("properties")
        if isinstance(raw_properties, Mapping):
            for key, value in raw_properties.items():
                text = _property_text(value)
                if text is not None:
                    properties[key] = text
        fields: list[str | None] = [None] * 6
        for code, name in enumerate(m.STANDARD_FIELDS):
            if name in raw:
                fields[code] = _property_text(raw[name])
            elif name in properties:
                fields[code] = properties.pop(name)
        for key, value in raw.items():
            if key not in m.FIELD_CODES and key != "properties" and isinstance(value, str):
                properties[key] = value
        self.fields = fields
        self.properties = properties
        self.never = False  # randomness or a custom strategy decided something
        self.second: int | None = None  # the one clock reading of this evaluation, if it needed one
        self.until: int | None = None  # the last second the answer is known to hold, if the clock bounds it
        self.now: str | None = None
        self.cache: dict[tuple[int, str], Any] = {}

    def lookup(self, field: int, prop: str | None) -> str | None:
        """A constraint's or rollout's field; a missing currentTime reads as now (Yggdrasil)."""
        if field == m.FIELD_PROPERTY:
            return self.properties.get(prop)  # type: ignore[arg-type]
        value = self.fields[field]
        if value is None and field == m.FIELD_CURRENT_TIME:
            return self.current_time()
        return value

    def lookup_plain(self, field: int, prop: str | None) -> str | None:
        """An override's or variant seed's field: no stand-in for a missing currentTime."""
        if field == m.FIELD_PROPERTY:
            return self.properties.get(prop)  # type: ignore[arg-type]
        return self.fields[field]

    def read_clock(self) -> int:
        """Now, read once per evaluation: every use of the clock sees the same second."""
        if self.second is None:
            self.second = int(time.time())
        return self.second

    def current_time(self) -> str:
        """Now as text. Whatever reads it may change its answer at the next second."""
        second = self.read_clock()
        if self.now is None:
            self.now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
        self.hold_until(second)
        return self.now

    def now_compared(self, c: m.Constraint) -> bool:
        """A date constraint on a missing currentTime: now against its target, and how long that stands."""
        second = self.read_clock()
        if c.flip == 0:
            self.hold_until(second)
        elif second < c.flip:
            self.hold_until(c.flip - 1)
        return _compare(c, second * 10**9)

    def hold_until(self, second: int) -> None:
        if self.until is None or second < self.until:
            self.until = second

    @property
    def valid_in(self) -> int:
        """How long the answer holds: CACHE_NEVER, CACHE_SNAPSHOT, or the last second it holds in."""
        if self.never:
            return m.CACHE_NEVER
        if self.until is not None:
            return self.until if self.until > 0 else m.CACHE_NEVER
        return m.CACHE_SNAPSHOT

    def parsed(self, kind: int, value: str) -> Any:
        key = (kind, value)
        if key not in self.cache:
            if kind == m.KIND_NUMBER:
                self.cache[key] = values.parse_context_number(value)
            elif kind == m.KIND_DATE:
                self.cache[key] = values.parse_date(value)
            elif kind == m.KIND_SEMVER:
                self.cache[key] = values.semver_key(value)
            else:
                self.cache[key] = values.parse_address(value)
        return self.cache[key]

    def random(self, upper: int) -> int:
        self.never = True
        return _RANDOM.randint(1, upper)

    def as_dict(self) -> dict[str, Any]:
        """The context as a custom strategy receives it."""
        found: dict[str, Any] = {
            n: v for n, v in zip(m.STANDARD_FIELDS, self.fields, strict=True) if v is not None
        }
        found["properties"] = dict(self.properties)
        return found


ADDRESS_KIND = 99  # cache key for parsed IP addresses


def _property_text(value: Any) -> str | None:
    """Property values as Yggdrasil reads them: strings as they are, numbers and booleans as JSON text,
    null, lists and objects dropped."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return orjson.dumps(value).decode()  # JSON's shortest form: 12.0 -> "12.0", as serde_json writes it
    return None


# ---------------------------------------------------------------------------------------- constraints


def _constraint_holds(c: m.Constraint, ctx: Context) -> bool:
    op = c.op
    if op == m.OP_FALSE:
        return False
    if op == m.OP_IN:
        if not c.values:
            result = False
        else:
            value = ctx.lookup(c.field, c.prop)
            result = value is not None and value in c.values
    elif op == m.OP_NOT_IN:
        if not c.values:
            result = True
        else:
            value = ctx.lookup(c.field, c.prop)
            result = value is None or value not in c.values
    elif op == m.OP_COMPARE and c.kind == m.KIND_DATE and _reads_now(c, ctx):
        result = ctx.now_compared(c)
    else:
        value = ctx.lookup(c.field, c.prop)
        result = False if value is None else _operator_holds(c, value, ctx)
    return result != c.inverted


def _reads_now(c: m.Constraint, ctx: Context) -> bool:
    """A constraint on currentTime when the context has none: it reads as now (Yggdrasil)."""
    return c.field == m.FIELD_CURRENT_TIME and ctx.fields[c.field] is None


def _operator_holds(c: m.Constraint, value: str, ctx: Context) -> bool:
    op = c.op
    if op == m.OP_STR_STARTS_WITH:
        text = value.lower() if c.case_insensitive else value
        return any(text.startswith(v) for v in c.values)
    if op == m.OP_STR_ENDS_WITH:
        text = value.lower() if c.case_insensitive else value
        return any(text.endswith(v) for v in c.values)
    if op == m.OP_STR_CONTAINS:
        text = value.lower() if c.case_insensitive else value
        return any(v in text for v in c.values)
    if op == m.OP_COMPARE:
        return _compare(c, ctx.parsed(c.kind, value))
    if op == m.OP_REGEX:
        return c.values is not None and values.regex_matches(c.values, value)
    if op == m.OP_IN_CIDR:
        address = ctx.parsed(ADDRESS_KIND, value)
        return address is not None and values.networks_contain(c.values, address)
    return False


def _compare(c: m.Constraint, actual: Any) -> bool:
    if actual is None:
        return False
    target = c.values
    cmp = c.cmp
    if cmp == m.CMP_EQ:
        if c.kind == m.KIND_NUMBER:
            return abs(actual - target) < _FLOAT_EPSILON
        return actual == target
    if cmp == m.CMP_GT:
        return actual > target
    if cmp == m.CMP_GTE:
        return actual >= target
    if cmp == m.CMP_LT:
        return actual < target
    return actual <= target


# ----------------------------------------------------------------------------------------- strategies


def _condition_holds(s: m.Strategy, ctx: Context, toggle_name: str) -> bool:
    kind = s.kind
    if kind == m.STRATEGY_DEFAULT:
        return True
    if kind == m.STRATEGY_FLEXIBLE_ROLLOUT:
        seed = _rollout_seed(s, ctx)
        if seed is None:
            return False
        group = s.group if s.group is not None else toggle_name
        return normalized_hash(group, seed, m.ROLLOUT_MODULUS) <= s.percentage
    if kind == m.STRATEGY_USER_WITH_ID:
        user_id = ctx.fields[m.FIELD_USER_ID]
        return user_id is not None and user_id in s.ids
    if kind in (m.STRATEGY_GRADUAL_USER_ID, m.STRATEGY_GRADUAL_SESSION_ID):
        field = m.FIELD_USER_ID if kind == m.STRATEGY_GRADUAL_USER_ID else m.FIELD_SESSION_ID
        ident = ctx.fields[field]
        return ident is not None and normalized_hash(s.group, ident, m.ROLLOUT_MODULUS) <= s.percentage  # type: ignore[arg-type]
    if kind == m.STRATEGY_GRADUAL_RANDOM:
        # Yggdrasil draws from 1..99, so 100 is always on and 0 never.
        return ctx.random(99) < s.percentage
    if kind == m.STRATEGY_REMOTE_ADDRESS:
        raw = ctx.fields[m.FIELD_REMOTE_ADDRESS]
        address = ctx.parsed(ADDRESS_KIND, raw) if raw is not None else None
        return address is not None and values.networks_contain(s.networks, address)
    if kind == m.STRATEGY_CONSTANT:
        return s.constant
    if kind == m.STRATEGY_CUSTOM:
        ctx.never = True  # a custom strategy may use anything; never cache its answers
        try:
            return bool(s.custom.is_enabled(s.parameters, ctx.as_dict()))
        except Exception:  # a user's strategy failing is that strategy being off
            return False
    return False


def _rollout_seed(s: m.Strategy, ctx: Context) -> str | None:
    sticky = s.stickiness
    if sticky == m.STICKY_DEFAULT:
        seed = ctx.fields[m.FIELD_USER_ID]
        if seed is None:
            seed = ctx.fields[m.FIELD_SESSION_ID]
        return seed if seed is not None else str(ctx.random(9999))
    if sticky == m.STICKY_RANDOM:
        return str(ctx.random(9999))
    return ctx.lookup(sticky, s.stickiness_prop)


def _strategy_matches(s: m.Strategy, ctx: Context, toggle_name: str) -> bool:
    for c in s.constraints:
        if not _constraint_holds(c, ctx):
            return False
    return _condition_holds(s, ctx, toggle_name)


def _first_match(flag: m.Flag, ctx: Context, toggle_name: str) -> m.Strategy | None:
    for s in flag.strategies:
        if _strategy_matches(s, ctx, toggle_name):
            return s
    return None


# ------------------------------------------------------------------------------------------- variants


def _pick_variant(variants: m.VariantList | None, ctx: Context) -> m.Variant | None:
    if variants is None:
        return None
    for variant in variants.variants:
        for field, prop, wanted in variant.overrides:
            value = ctx.lookup_plain(field, prop)
            if value is not None and value in wanted:
                return variant
    total = variants.total
    if total == 0:
        return None
    if variants.stickiness == m.STICKY_DEFAULT:
        seed = ctx.fields[m.FIELD_USER_ID]
        if seed is None:
            seed = ctx.fields[m.FIELD_SESSION_ID]
    else:
        seed = ctx.lookup_plain(variants.stickiness, variants.stickiness_prop)
    if seed is None:
        target = ctx.random(total)
    else:
        target = normalized_hash(variants.group, seed, total, m.VARIANT_SEED)
    cumulative = 0
    for variant in variants.variants:
        cumulative += variant.weight
        if cumulative >= target:
            return variant
    return None


def _variant_list(flag: m.Flag, matched: m.Strategy | None) -> m.VariantList | None:
    if matched is not None and matched.variants is not None:
        return matched.variants
    return flag.variants


# ------------------------------------------------------------------------------------------ the engine


class Engine:
    """Evaluates a compiled snapshot. Built once per snapshot; every method is safe to call concurrently."""

    implementation = "pure"

    def __init__(self, flags: Sequence[m.Flag]) -> None:
        self.flags = tuple(flags)
        self.names = tuple(f.name for f in self.flags)
        self.index = {name: i for i, name in enumerate(self.names)}

    def patched(self, names: Sequence[str], flags: Sequence[m.Flag]) -> Engine:
        """A new Engine that answers as one built whole from the flags `names` lists, in that order: each
        of `flags` (their dependencies indexed in `names`) new or in place of the flag of its name, every
        other name kept from this engine, its dependencies pointed at where the parent now stands (-1 when
        it is gone). The compiled twin copies its tables and appends the new rows."""
        given = {flag.name: flag for flag in flags}
        index = {name: i for i, name in enumerate(names)}
        moved = [index.get(name, -1) for name in self.names]
        result = []
        for name in names:
            flag = given.get(name)
            if flag is None:
                found = self.index.get(name)
                if found is None:
                    raise ValueError(f"flag {name!r} is neither kept nor given")
                flag = self.flags[found]
                if any(dep.parent >= 0 and moved[dep.parent] != dep.parent for dep in flag.dependencies):
                    flag = copy.copy(flag)
                    flag.dependencies = tuple(
                        m.Dependency(moved[dep.parent] if dep.parent >= 0 else -1, dep.enabled, dep.variants)
                        for dep in flag.dependencies
                    )
            result.append(flag)
        return Engine(result)

    def _dependency_holds(self, dep: m.Dependency, ctx: Context, child_name: str) -> bool:
        if dep.parent < 0:
            return False
        parent = self.flags[dep.parent]
        if parent.dependencies:
            return False  # no transitive dependencies (and so no cycles)
        # The parent is evaluated with the child's context and the child's name as default rollout group.
        matched = None if parent.broken else _first_match(parent, ctx, child_name)
        parent_on = (
            parent.enabled and not parent.broken and (matched is not None or not parent.has_strategies)
        )
        if dep.variants:
            variant = _pick_variant(_variant_list(parent, matched), ctx)
            if variant is not None and variant.name not in dep.variants:
                return False
        return parent_on == dep.enabled

    def outcome(self, flag: m.Flag, ctx: Context) -> int:
        """-1 when the flag is off for this context, else the index of its enabled fragment."""
        if not flag.enabled or flag.broken:
            return -1
        for dep in flag.dependencies:
            if not self._dependency_holds(dep, ctx, flag.name):
                return -1
        matched = _first_match(flag, ctx, flag.name)
        if matched is None and flag.has_strategies:
            return -1
        variant = _pick_variant(_variant_list(flag, matched), ctx)
        return 0 if variant is None else variant.outcome

    # Python-object API (tests, SDK-style use) --------------------------------------------------------

    def is_enabled(self, name: str, context: Mapping[str, Any]) -> bool:
        i = self.index.get(name)
        return i is not None and self.outcome(self.flags[i], Context(context)) >= 0

    def get_variant(self, name: str, context: Mapping[str, Any]) -> dict[str, Any]:
        i = self.index.get(name)
        found = -1 if i is None else self.outcome(self.flags[i], Context(context))
        if found < 0:
            return {"name": "disabled", "enabled": False, "feature_enabled": False}
        if found == 0:
            return {"name": "disabled", "enabled": False, "feature_enabled": True}
        variant_name, payload, _ = self.flags[i].outcomes[found]  # type: ignore[index]
        result: dict[str, Any] = {"name": variant_name, "enabled": True, "feature_enabled": True}
        if payload is not None:
            result["payload"] = payload
        return result

    # Response bodies (the proxy's hot path) ----------------------------------------------------------

    def evaluate_all_body(
        self, context: Mapping[str, Any], include_disabled: bool = False
    ) -> tuple[bytes, int]:
        """(body, valid_in): the toggles of GET /proxy (or /proxy/all), and how long that answer holds."""
        ctx = Context(context)
        parts = []
        for flag in self.flags:
            found = self.outcome(flag, ctx)
            if found >= 0:
                parts.append(flag.enabled_list[found])
            elif include_disabled:
                parts.append(flag.disabled_all)
        return BODY_PREFIX + b",".join(parts) + BODY_SUFFIX, ctx.valid_in

    def evaluate_named_body(
        self, context: Mapping[str, Any], names: Sequence[str]
    ) -> tuple[bytes, int, list[tuple[str, bool, str]]]:
        """(body, valid_in, outcomes) for POST /proxy: one toggle per requested name, in order."""
        ctx = Context(context)
        parts = []
        outcomes = []
        for name in names:
            i = self.index.get(name)
            if i is None:
                parts.append(unknown_named(name))
                outcomes.append((name, False, "disabled"))
                continue
            flag = self.flags[i]
            found = self.outcome(flag, ctx)
            if found >= 0:
                parts.append(flag.enabled_named[found])
                outcomes.append((name, True, flag.outcomes[found][0]))
            else:
                parts.append(flag.disabled_named)
                outcomes.append((name, False, "disabled"))
        return BODY_PREFIX + b",".join(parts) + BODY_SUFFIX, ctx.valid_in, outcomes
