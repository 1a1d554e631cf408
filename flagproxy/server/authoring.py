"""Rules applied when flags are saved: constraint, parameter and variant normalisation, and variant
weights resolved the way Unleash's `fixVariantWeights` does (evaluation.md section 1)."""

from __future__ import annotations

import ipaddress
from typing import Any

import orjson

from flagproxy.server.errors import ValidationFailed
from flagproxy.server.schemas import ConstraintBody, StrategyVariantBody, VariantBody
from flagproxy.snapshot import engine_reads_value

TOTAL_WEIGHT = 1000
SINGLE_VALUE_OPERATORS = frozenset(
    {
        "NUM_EQ", "NUM_GT", "NUM_GTE", "NUM_LT", "NUM_LTE", "DATE_AFTER", "DATE_BEFORE",
        "SEMVER_EQ", "SEMVER_GT", "SEMVER_LT", "SEMVER_GTE", "SEMVER_LTE", "REGEX",
    }
)  # fmt: skip
BUILT_IN_STRATEGIES = frozenset(
    {
        "default", "flexibleRollout", "userWithId", "gradualRolloutUserId", "gradualRolloutSessionId",
        "gradualRolloutRandom", "remoteAddress", "applicationHostname",
    }
)  # fmt: skip


VALUE_NEEDS = {
    "NUM": "a number",
    "DATE": "an RFC 3339 date-time like 2026-01-31T12:00:00Z",
    "SEMVER": "a semantic version like 1.2.3",
    "REGEX": "a valid regular expression (the Rust regex crate's syntax)",
}


def _value_problem(operator: str, value: str, case_insensitive: bool) -> str | None:
    """What is wrong with a single-value operator's value, read as the evaluators read it
    (flagproxy/snapshot.py `engine_reads_value`), or None."""
    if engine_reads_value(operator, value, case_insensitive):
        return None
    return f"operator {operator} needs {VALUE_NEEDS[operator.split('_', 1)[0]]}"


def constraint(body: ConstraintBody, path: str) -> dict[str, Any]:
    """The stored (and served) form of a constraint; a value the evaluators could not read is refused
    (as Unleash refuses a NUM_ operator's non-number), never stored to fail silently."""
    if body.operator in SINGLE_VALUE_OPERATORS and not body.value:
        raise ValidationFailed(f"{path}.value", f"operator {body.operator} needs a `value`")
    if body.operator in SINGLE_VALUE_OPERATORS:
        assert body.value is not None
        problem = _value_problem(body.operator, body.value, body.caseInsensitive)
        if problem:
            raise ValidationFailed(f"{path}.value", problem)
    if body.operator == "IN_CIDR":
        for index, entry in enumerate(body.values or []):
            try:
                ipaddress.ip_network(entry.strip(), strict=False)
            except ValueError:
                raise ValidationFailed(
                    f"{path}.values[{index}]", "operator IN_CIDR needs IP addresses or CIDR ranges"
                ) from None
    shaped: dict[str, Any] = {
        "contextName": body.contextName,
        "operator": body.operator,
        "values": list(body.values or []),
        "inverted": body.inverted,
        "caseInsensitive": body.caseInsensitive,
    }
    if body.value is not None:
        shaped["value"] = body.value
    return shaped


def constraints(bodies: list[ConstraintBody], path: str = "constraints") -> list[dict[str, Any]]:
    return [constraint(body, f"{path}[{index}]") for index, body in enumerate(bodies)]


def parameter_text(value: str | int | float | bool) -> str:
    """Strategy parameters are strings on the wire, whatever the author sent."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def parameters(body: dict[str, str | int | float | bool]) -> dict[str, str]:
    return {name: parameter_text(value) for name, value in body.items()}


def _check_payload(variant: StrategyVariantBody, path: str) -> None:
    payload = variant.payload
    if payload is None:
        return
    if payload.type == "json":
        try:
            orjson.loads(payload.value)
        except orjson.JSONDecodeError:
            raise ValidationFailed(f"{path}.payload.value", "a json payload must be valid JSON") from None
    elif payload.type == "number":
        try:
            float(payload.value)
        except ValueError:
            raise ValidationFailed(f"{path}.payload.value", "a number payload must be a number") from None


def fix_variant_weights(variants: list[dict[str, Any]], path: str = "variants") -> list[dict[str, Any]]:
    """Fixed variants keep their weight; variable ones share what is left of 1000 evenly, the first
    `remainder` of them getting one more."""
    if not variants:
        return variants
    fixed_total = sum(v["weight"] for v in variants if v["weightType"] == "fix")
    variable = [v for v in variants if v["weightType"] != "fix"]
    if fixed_total > TOTAL_WEIGHT:
        raise ValidationFailed(f"{path}", "the fixed weights add up to more than 1000")
    if not variable:
        if fixed_total != TOTAL_WEIGHT:
            raise ValidationFailed(f"{path}", "with only fixed weights the weights must add up to 1000")
        return variants
    share, remainder = divmod(TOTAL_WEIGHT - fixed_total, len(variable))
    for index, variant in enumerate(variable):
        variant["weight"] = share + (1 if index < remainder else 0)
    return variants


def variants(bodies: list[StrategyVariantBody] | list[VariantBody], path: str = "variants") -> list[dict]:
    """The stored (and served) variant list, weights resolved."""
    shaped: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, body in enumerate(bodies):
        where = f"{path}[{index}]"
        if body.name in seen:
            raise ValidationFailed(f"{where}.name", f"variant names must be unique; {body.name!r} repeats")
        seen.add(body.name)
        _check_payload(body, where)
        variant: dict[str, Any] = {
            "name": body.name,
            "weight": body.weight,
            "weightType": body.weightType,
            "stickiness": body.stickiness,
        }
        if body.payload is not None:
            variant["payload"] = {"type": body.payload.type, "value": body.payload.value}
        if isinstance(body, VariantBody):
            variant["overrides"] = [
                {"contextName": o.contextName, "values": list(o.values)} for o in body.overrides
            ]
        shaped.append(variant)
    return fix_variant_weights(shaped, path)
