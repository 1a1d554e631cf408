"""Build compiled flags from an Unleash client API payload (version 1 or 2).

A flag that cannot be compiled (an unknown operator, a missing segment, a value that does not parse, a
rollout above 100...) is kept but marked broken, so it evaluates to off, and a warning names it: this is
Yggdrasil's behaviour (evaluation.md section 8) and it never fails the rest of the update.
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from flagproxy.compiler import model as m
from flagproxy.compiler import values
from flagproxy.compiler.fragments import add_fragments


class CompileError(ValueError):
    """A part of a flag that Yggdrasil would refuse to compile."""


_COMPARISONS = {
    "NUM_EQ": m.CMP_EQ,
    "NUM_GT": m.CMP_GT,
    "NUM_GTE": m.CMP_GTE,
    "NUM_LT": m.CMP_LT,
    "NUM_LTE": m.CMP_LTE,
    "DATE_AFTER": m.CMP_GT,
    "DATE_BEFORE": m.CMP_LT,
    "SEMVER_EQ": m.CMP_EQ,
    "SEMVER_GT": m.CMP_GT,
    "SEMVER_GTE": m.CMP_GTE,
    "SEMVER_LT": m.CMP_LT,
    "SEMVER_LTE": m.CMP_LTE,
}
_STRING_OPS = {
    "STR_STARTS_WITH": m.OP_STR_STARTS_WITH,
    "STR_ENDS_WITH": m.OP_STR_ENDS_WITH,
    "STR_CONTAINS": m.OP_STR_CONTAINS,
}
_STANDARD_STICKINESS = {name: code for name, code in m.FIELD_CODES.items() if name != "currentTime"}


def build_flags(
    payload: Mapping[str, Any],
    custom_strategies: Mapping[str, Any] | None = None,
    hostname: str | None = None,
) -> tuple[list[m.Flag], list[str]]:
    """Compile every feature of a full client API payload. Returns the flags in definition order (a
    repeated name keeps its first position and its last definition) and one warning per broken flag."""
    features = payload.get("features")
    if not isinstance(features, list):
        raise ValueError("not a client features document: 'features' must be a list")
    segments = segment_map(payload.get("segments"))
    custom = dict(custom_strategies or {})
    host = (hostname if hostname is not None else socket.gethostname()).lower()

    definitions: dict[str, Mapping[str, Any]] = {}
    for feature in features:
        if isinstance(feature, Mapping) and isinstance(feature.get("name"), str):
            definitions[feature["name"]] = feature
    index = {name: i for i, name in enumerate(definitions)}

    flags: list[m.Flag] = []
    warnings: list[str] = []
    for name, feature in definitions.items():
        flag, warning = compile_feature(name, feature, segments, custom, host, index)
        if warning is not None:
            warnings.append(warning)
        flags.append(flag)
    return flags, warnings


def compile_feature(
    name: str,
    feature: Mapping[str, Any],
    segments: Mapping[int, list[Any]],
    custom: Mapping[str, Any],
    host: str,
    index: Mapping[str, int],
) -> tuple[m.Flag, str | None]:
    """One feature compiled alone (build_flags's step, and a streamed change's: compiler/incremental.py):
    `segments` by id (`segment_map`), `index` every flag's position in the document (dependencies point
    at their parent's). The warning says why a broken flag is off."""
    flag = m.Flag(name)
    warning = None
    try:
        _compile_flag(flag, feature, segments, custom, host, index)
    except (CompileError, TypeError, ValueError, AttributeError) as exc:
        flag = _broken_flag(name, feature, index)
        warning = f"flag {name!r} could not be compiled and is always off: {exc}"
    add_fragments(flag, feature)
    return flag, warning


# Every key of a feature that `build_flags` (and add_fragments) reads: what a toggle answer can depend on.
# Keep it whole when the compiler comes to read another key: `evaluation_digest` hashes only these.
EVALUATED_KEYS = ("name", "enabled", "impressionData", "variants", "dependencies", "strategies")


def evaluation_digest(payload: Mapping[str, Any]) -> bytes | None:
    """A digest of what compiling `payload` reads (each feature's EVALUATED_KEYS, in order, and the
    segments): two documents with equal digests compile to engines that answer every request alike, so
    an edit of anything else (a description, a timestamp) need not replace a served engine or its cached
    answers. None for what is not a plain features document (delta events)."""
    features = payload.get("features")
    if not isinstance(features, list):
        return None
    kept = [
        [feature.get(key) for key in EVALUATED_KEYS] if isinstance(feature, Mapping) else feature
        for feature in features
    ]
    encoded = orjson.dumps([kept, payload.get("segments")], option=orjson.OPT_NON_STR_KEYS)
    return hashlib.blake2b(encoded, digest_size=16).digest()


def segment_map(segments: Any) -> dict[int, list[Any]]:
    found: dict[int, list[Any]] = {}
    for segment in segments or ():
        if isinstance(segment, Mapping) and isinstance(segment.get("id"), int):
            found[segment["id"]] = segment.get("constraints") or []
    return found


def _broken_flag(name: str, feature: Mapping[str, Any], index: Mapping[str, int]) -> m.Flag:
    """A flag that is always off. Its feature variants and dependencies are still compiled when they
    can be, because a child may ask for this flag's variant (Yggdrasil does the same)."""
    flag = m.Flag(name)
    flag.enabled = bool(feature.get("enabled"))
    flag.broken = True
    flag.impression_data = feature.get("impressionData") is True
    try:
        flag.variants = _feature_variants(flag, feature.get("variants"))
    except (CompileError, TypeError, ValueError, AttributeError):
        flag.variants = None
        flag.outcomes = [m.NO_VARIANT]
    try:
        flag.dependencies = _dependencies(feature.get("dependencies"), index)
    except (TypeError, ValueError, AttributeError):
        flag.dependencies = ()
    return flag


def _compile_flag(
    flag: m.Flag,
    feature: Mapping[str, Any],
    segments: Mapping[int, list[Any]],
    custom: Mapping[str, Any],
    host: str,
    index: Mapping[str, int],
) -> None:
    flag.enabled = feature.get("enabled") is True
    flag.impression_data = feature.get("impressionData") is True
    flag.variants = _feature_variants(flag, feature.get("variants"))
    strategies = [
        s
        for s in feature.get("strategies") or ()
        if not (isinstance(s, Mapping) and s.get("disabled") is True)
    ]
    # SPEC.md E2: a strategy marked disabled is never evaluated. A flag whose every strategy is disabled
    # has none left and is therefore on, exactly as if the server had not sent them.
    flag.has_strategies = bool(strategies)
    flag.strategies = tuple(_strategy(flag, s, segments, custom, host) for s in strategies)
    flag.dependencies = _dependencies(feature.get("dependencies"), index)


def _dependencies(dependencies: Any, index: Mapping[str, int]) -> tuple[m.Dependency, ...]:
    compiled = []
    for dep in dependencies or ():
        parent_name = dep.get("feature") if isinstance(dep, Mapping) else None
        parent = index.get(parent_name, -1) if isinstance(parent_name, str) else -1
        enabled = dep.get("enabled") is not False if isinstance(dep, Mapping) else True
        wanted = dep.get("variants") if isinstance(dep, Mapping) else None
        variants = frozenset(v for v in wanted if isinstance(v, str)) if isinstance(wanted, list) else None
        compiled.append(m.Dependency(parent, enabled, variants))
    return tuple(compiled)


# ------------------------------------------------------------------------------------------- strategies


def _strategy(
    flag: m.Flag,
    spec: Mapping[str, Any],
    segments: Mapping[int, list[Any]],
    custom: Mapping[str, Any],
    host: str,
) -> m.Strategy:
    name = spec.get("name")
    params = spec.get("parameters") or {}
    if not isinstance(params, Mapping):
        raise CompileError("strategy parameters must be an object")
    params = {k: v if isinstance(v, str) else _param_text(v) for k, v in params.items()}

    strategy = _strategy_condition(name, params, custom, host)
    constraints = [_constraint(c) for c in spec.get("constraints") or ()]
    for segment_id in spec.get("segments") or ():
        if segment_id not in segments:
            raise CompileError(f"segment {segment_id} does not exist")
        constraints.extend(_constraint(c) for c in segments[segment_id])
    strategy.constraints = tuple(constraints)

    variants = spec.get("variants")
    if variants:
        stickiness, prop = _variant_stickiness(params.get("stickiness") or "default")
        group = params.get("groupId", flag.name)
        strategy.variants = _variant_list(flag, variants, group, stickiness, prop, strategy_level=True)
    return strategy


def _param_text(value: Any) -> str:
    # Servers send strings; a number or bool from another upstream reads as its JSON text.
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _percentage(params: Mapping[str, str], key: str, limit: int | None = 100) -> int:
    """Rust's usize::from_str: ASCII digits with an optional '+'. Anything else never matches (-1); above
    the limit the whole flag fails to compile."""
    raw = params.get(key)
    if raw is None:
        return -1
    digits = raw[1:] if raw.startswith("+") else raw
    if not digits.isascii() or not digits.isdigit():
        return -1
    value = int(digits)
    if limit is not None and value > limit:
        raise CompileError(f"{key} {raw!r} is above {limit}")
    return value


def _strategy_condition(
    name: Any, params: dict[str, str], custom: Mapping[str, Any], host: str
) -> m.Strategy:
    if name == "default":
        return m.Strategy(m.STRATEGY_DEFAULT)
    if name == "userWithId":
        if "userIds" not in params:
            return _constant(False)
        s = m.Strategy(m.STRATEGY_USER_WITH_ID)
        s.ids = frozenset(part.strip() for part in params["userIds"].split(","))
        return s
    if name in ("gradualRolloutUserId", "gradualRolloutSessionId"):
        percentage = _percentage(params, "percentage")
        if percentage < 0 or "groupId" not in params:
            return _constant(False)
        kind = m.STRATEGY_GRADUAL_USER_ID if name == "gradualRolloutUserId" else m.STRATEGY_GRADUAL_SESSION_ID
        s = m.Strategy(kind)
        s.percentage = percentage
        s.group = params["groupId"]
        return s
    if name == "gradualRolloutRandom":
        percentage = _percentage(params, "percentage", limit=None)
        if percentage <= 0 or percentage >= 100:
            # The draw is 1..99 (Yggdrasil): 0 is never on, 100 and more always. Deciding it here keeps the
            # answer free of randomness, so the proxy may cache it.
            return _constant(percentage >= 100)
        s = m.Strategy(m.STRATEGY_GRADUAL_RANDOM)
        s.percentage = percentage
        return s
    if name == "flexibleRollout":
        percentage = _percentage(params, "rollout")
        if percentage < 0:
            return _constant(False)
        stickiness, prop = _rollout_stickiness(params.get("stickiness") or "default")
        # A bucket is 1..100: rollout 0 is never on, and rollout 100 is always on when a seed always exists
        # (default stickiness falls back to a random one, random has one). Decided here, the request skips
        # the hash (a full rollout is the most common strategy there is) and the answer stays cacheable.
        if percentage == 0:
            return _constant(False)
        if percentage == 100 and stickiness in (m.STICKY_DEFAULT, m.STICKY_RANDOM):
            return _constant(True)
        s = m.Strategy(m.STRATEGY_FLEXIBLE_ROLLOUT)
        s.percentage = percentage
        s.group = params.get("groupId")
        s.stickiness, s.stickiness_prop = stickiness, prop
        return s
    if name == "remoteAddress":
        if "IPs" not in params:
            return _constant(False)
        s = m.Strategy(m.STRATEGY_REMOTE_ADDRESS)
        s.networks = values.parse_networks(params["IPs"].split(","))
        return s
    if name == "applicationHostname":
        names = {part.strip().lower() for part in params.get("hostNames", "").split(",")}
        return _constant(host in names)
    if isinstance(name, str) and name in custom:
        s = m.Strategy(m.STRATEGY_CUSTOM)
        s.custom = custom[name]
        s.parameters = dict(params)
        return s
    return m.Strategy(m.STRATEGY_UNKNOWN)


def _constant(answer: bool) -> m.Strategy:
    s = m.Strategy(m.STRATEGY_CONSTANT)
    s.constant = answer
    return s


def _rollout_stickiness(name: str) -> tuple[int, str | None]:
    if name == "default":
        return m.STICKY_DEFAULT, None
    if name == "random":
        return m.STICKY_RANDOM, None
    if name in m.FIELD_CODES:
        return m.FIELD_CODES[name], None
    return m.FIELD_PROPERTY, name


def _variant_stickiness(name: str) -> tuple[int, str | None]:
    # Variant stickiness knows five standard fields; "random" and "currentTime" read properties.
    if name == "default":
        return m.STICKY_DEFAULT, None
    if name in _STANDARD_STICKINESS:
        return _STANDARD_STICKINESS[name], None
    return m.FIELD_PROPERTY, name


# ------------------------------------------------------------------------------------------ constraints


def _field(name: Any) -> tuple[int, str | None]:
    if not isinstance(name, str):
        raise CompileError("constraint contextName must be a string")
    code = m.FIELD_CODES.get(name)
    return (code, None) if code is not None else (m.FIELD_PROPERTY, name)


def _string_list(raw: Any) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        raise CompileError("constraint values must be a list of strings")
    return raw


def _constraint(spec: Any) -> m.Constraint:
    if not isinstance(spec, Mapping):
        raise CompileError("a constraint must be an object")
    field, prop = _field(spec.get("contextName"))
    operator = spec.get("operator")
    inverted = spec.get("inverted") is True
    ci = spec.get("caseInsensitive") is True
    if operator in ("IN", "NOT_IN"):
        op = m.OP_IN if operator == "IN" else m.OP_NOT_IN
        return m.Constraint(field, prop, op, frozenset(_string_list(spec.get("values"))), inverted=inverted)
    if operator in _STRING_OPS:
        items = _string_list(spec.get("values"))
        if not items:
            raise CompileError(f"{operator} needs at least one value")
        if ci:
            items = [v.lower() for v in items]
        return m.Constraint(
            field, prop, _STRING_OPS[operator], tuple(items), inverted=inverted, case_insensitive=ci
        )
    if operator == "IN_CIDR":
        items = _string_list(spec.get("values"))
        if not items:
            raise CompileError("IN_CIDR needs at least one value")
        return m.Constraint(field, prop, m.OP_IN_CIDR, values.parse_networks(items), inverted=inverted)
    if operator == "REGEX":
        pattern = spec.get("value")
        pattern = pattern if isinstance(pattern, str) else ""
        compiled = values.compile_regex(pattern, ci)
        return m.Constraint(field, prop, m.OP_REGEX, compiled, inverted=inverted, case_insensitive=ci)
    if operator in _COMPARISONS:
        return _comparison(field, prop, operator, spec.get("value"), inverted)
    raise CompileError(f"unknown constraint operator {operator!r}")


def _comparison(field: int, prop: str | None, operator: str, value: Any, inverted: bool) -> m.Constraint:
    """NUM_*, DATE_* and SEMVER_*. Like Yggdrasil's rule grammar, the value's shape decides what is
    compared: a date, then a semver version, then a number (so `NUM_GT "1.2.3"` compares versions)."""
    if not isinstance(value, str):
        raise CompileError(f"{operator} needs a string value")
    cmp = _COMPARISONS[operator]
    if operator.startswith("SEMVER") and value.startswith("v"):
        return m.Constraint(field, prop, m.OP_FALSE, None)
    if values.is_date_value(value):
        target: Any = values.parse_date(value)
        if target is None:
            raise CompileError(f"{operator} value {value!r} is not a valid date")
        return m.Constraint(field, prop, m.OP_COMPARE, target, inverted=inverted, cmp=cmp, kind=m.KIND_DATE)
    if values.is_semver_shaped(value):
        key = values.semver_key(value)
        if key is not None:
            return m.Constraint(
                field, prop, m.OP_COMPARE, key, inverted=inverted, cmp=cmp, kind=m.KIND_SEMVER
            )
    if values.is_number_value(value):
        number = float(value.strip(" \t"))
        return m.Constraint(field, prop, m.OP_COMPARE, number, inverted=inverted, cmp=cmp, kind=m.KIND_NUMBER)
    raise CompileError(f"{operator} value {value!r} is not a number, date or version")


# --------------------------------------------------------------------------------------------- variants


def _feature_variants(flag: m.Flag, variants: Any) -> m.VariantList | None:
    if not variants:
        return None
    if not isinstance(variants, list):  # an object here raised KeyError past the broken-flag fallback
        raise CompileError("feature variants must be a list")
    first = variants[0] if isinstance(variants[0], Mapping) else {}
    stickiness, prop = _variant_stickiness(first.get("stickiness") or "default")
    return _variant_list(flag, variants, flag.name, stickiness, prop, strategy_level=False)


def _variant_list(
    flag: m.Flag,
    variants: Iterable[Any],
    group: str,
    stickiness: int,
    prop: str | None,
    *,
    strategy_level: bool,
) -> m.VariantList:
    compiled = []
    for spec in variants:
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
            raise CompileError("a variant needs a name")
        weight = spec.get("weight", 0)
        if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
            raise CompileError(f"variant {spec['name']!r} has an invalid weight {weight!r}")
        # Strategy variants never have overrides (Yggdrasil drops them).
        overrides = () if strategy_level else _overrides(spec.get("overrides"))
        payload = spec.get("payload")
        if payload is not None and not (isinstance(payload, Mapping) and _renders(payload)):
            raise CompileError(f"variant {spec['name']!r} has an invalid payload")
        flag.outcomes.append((spec["name"], payload, strategy_level))
        compiled.append(m.Variant(spec["name"], weight, overrides, len(flag.outcomes) - 1))
    variant_list = m.VariantList(tuple(compiled), group, stickiness, prop)
    if variant_list.total > m.MAX_TOTAL_WEIGHT:  # Yggdrasil's weights are 32-bit
        raise CompileError(f"variant weights add up to {variant_list.total}, above {m.MAX_TOTAL_WEIGHT}")
    return variant_list


def _renders(payload: Mapping[str, Any]) -> bool:
    """Whether the payload can be written into an answer. A document parsed from bytes always can (orjson
    reads integers past 64 bits as floats); one handed over as Python objects may hold such an integer,
    which raised out of compile_snapshot when the answer fragments were rendered."""
    try:
        orjson.dumps(payload)
    except TypeError:
        return False
    return True


def _overrides(overrides: Any) -> tuple[tuple[int, str | None, frozenset[str]], ...]:
    compiled = []
    for spec in overrides or ():
        if not isinstance(spec, Mapping):
            raise CompileError("a variant override must be an object")
        field, prop = _field(spec.get("contextName"))
        compiled.append((field, prop, frozenset(_string_list(spec.get("values")))))
    return tuple(compiled)
