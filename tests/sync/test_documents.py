"""The features document checker (flagproxy/sync/documents.py): every document of the Unleash client
specification passes (full documents and delta events alike), optional fields may be absent or null as
Unleash allows, and a wrong type anywhere the evaluator reads is refused, naming its JSON path."""

from __future__ import annotations

import json

import pytest

from flagproxy.sync.documents import DocumentError, check_document
from tests.conftest import SPEC_DIR

SPEC_FILES = json.loads((SPEC_DIR / "index.json").read_text())


@pytest.mark.parametrize("name", SPEC_FILES)
def test_every_client_specification_document_passes(name: str) -> None:
    check_document(json.loads((SPEC_DIR / name).read_text())["state"])


def test_optional_fields_may_be_null_or_absent() -> None:
    feature = {
        "name": "f",
        "enabled": True,
        "impressionData": None,
        "project": None,
        "variants": None,
        "dependencies": [{"feature": "g", "enabled": None, "variants": None}],
        "strategies": [
            {
                "name": "flexibleRollout",
                "parameters": {"rollout": 50, "stickiness": "default", "groupId": "f", "on": True},
                "constraints": [{"contextName": "userId", "operator": "IN", "values": None, "value": None,
                                 "inverted": None, "caseInsensitive": None}],
                "segments": None,
                "variants": [{"name": "a", "weight": 1000, "payload": None, "stickiness": None}],
            },
            {"name": "default"},
        ],
    }  # fmt: skip
    check_document({"version": 2, "features": [feature], "segments": None})
    check_document({"events": [{"type": "hydration", "eventId": 1}, {"type": "something-new"}]})


# The reasons as docs/proxy.md lists them (the `reason` label of flagproxy_refused_documents_total).
@pytest.mark.parametrize(
    ("document", "reason", "path"),
    [
        ([], "not_a_document", "$"),
        ({"features": "x"}, "not_a_document", "$"),
        ({"features": [{"enabled": True}]}, "missing_field", "$.features[0].name"),
        ({"features": [{"name": "f", "enabled": "yes"}]}, "wrong_type", "$.features[0].enabled"),
        ({"features": [{"name": "f", "enabled": True,
                        "strategies": [{"name": "default", "parameters": {"a": []}}]}]},
         "wrong_type", "$.features[0].strategies[0].parameters.a"),
        ({"features": [{"name": "f", "enabled": True, "variants": [{"name": "a", "weight": "1"}]}]},
         "wrong_type", "$.features[0].variants[0].weight"),
        ({"features": [{"name": "f", "enabled": True, "variants": [{"name": "a", "weight": True}]}]},
         "wrong_type", "$.features[0].variants[0].weight"),
        ({"features": [], "segments": [{"id": "1", "constraints": []}]}, "wrong_type", "$.segments[0].id"),
        ({"events": [{"type": "segment-removed", "segmentId": "1"}]}, "wrong_type", "$.events[0].segmentId"),
        ({"events": [{"type": "feature-removed"}]}, "missing_field", "$.events[0].featureName"),
        ({"events": [{"eventId": 1}]}, "wrong_type", "$.events[0].type"),
    ],
)  # fmt: skip
def test_a_wrong_type_is_refused_with_its_path(document: object, reason: str, path: str) -> None:
    with pytest.raises(DocumentError) as refused:
        check_document(document)
    assert refused.value.reason == reason
    assert refused.value.path == path
    assert str(refused.value).startswith(path)
