"""The official Unleash client specification (../shared/client-specification) as test cases."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.conftest import SPEC_DIR


@dataclass(frozen=True)
class Case:
    file: str
    description: str
    state: dict[str, Any]
    context: dict[str, Any]
    toggle: str
    expected: Any  # a bool for isEnabled cases, a variant dict for variant cases
    is_variant: bool

    @property
    def id(self) -> str:
        return f"{self.file}-{self.description}"


def load_cases() -> list[Case]:
    cases = []
    for name in json.loads((SPEC_DIR / "index.json").read_text()):
        spec = json.loads((SPEC_DIR / name).read_text())
        stem = name.removesuffix(".json")
        for t in spec.get("tests", []):
            cases.append(
                Case(
                    stem,
                    t["description"],
                    spec["state"],
                    t["context"],
                    t["toggleName"],
                    t["expectedResult"],
                    False,
                )
            )
        for t in spec.get("variantTests", []):
            cases.append(
                Case(
                    stem,
                    t["description"],
                    spec["state"],
                    t["context"],
                    t["toggleName"],
                    t["expectedResult"],
                    True,
                )
            )
    return cases


CASES = load_cases()


def variant_matches(actual: dict[str, Any], expected: dict[str, Any]) -> bool:
    """The comparison every SDK runner uses: name, enabled, feature_enabled, and payload (absent == null)."""
    return (
        actual["name"] == expected["name"]
        and actual["enabled"] == expected["enabled"]
        and actual["feature_enabled"] == expected["feature_enabled"]
        and actual.get("payload") == expected.get("payload")
    )
