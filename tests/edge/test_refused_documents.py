"""`flagproxy edge` refuses a features document of the wrong type whole (flagproxy/sync/documents.py), from
its upstream feeds and from its offline bootstrap file: the last good flags keep serving with the same
answers and ETags, ready stays 200, and the log names the first offending JSON path once. Before the
check, `{"features": [1, "x", null]}` from the upstream emptied every answer, and a flag whose `strategies`
was a string dropped out of them."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.edge.harness import CountingUpstream, EdgeProcess, edge, features_doc
from tests.edge.test_offline import write

CLIENT = "*:development.refusal-client"
FRONTEND = "*:development.refusal-frontend"
GOOD = features_doc(("first", "default", True), ("second", "default", True))


def _broken_strategies() -> dict[str, Any]:
    document = copy.deepcopy(GOOD)
    document["features"][1]["strategies"] = "default"
    return document


BAD: list[tuple[dict[str, Any], str]] = [
    ({"version": 2, "features": [1, "x", None]}, "$.features[0] must be an object"),
    ({"events": [1, "x", None]}, "$.events[0] must be an object"),
    (_broken_strategies(), "$.features[1].strategies must be a list"),
]


def served(process: EdgeProcess) -> tuple[Any, ...]:
    answers = []
    for path, token in (("/api/client/features", CLIENT), ("/api/frontend", FRONTEND)):
        status, headers, body = process.get(path, token)
        answers.append((status, headers.get("etag"), body))
    answers.append(process.get("/internal-backstage/ready")[0])
    return tuple(answers)


def refused(process: EdgeProcess) -> dict[str, float]:
    """flagproxy_refused_documents_total by reason, as Prometheus reads /internal-backstage/metrics."""
    status, _, body = process.get("/internal-backstage/metrics")
    assert status == 200, body
    return {
        sample.labels["reason"]: sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
        if sample.name == "flagproxy_refused_documents_total"
    }


def feature_polls(upstream: CountingUpstream) -> int:
    return sum(1 for r in upstream.requests if r["path"] == "/api/client/features")


def test_a_feed_document_of_the_wrong_type_is_refused_whole(counting: CountingUpstream) -> None:
    counting.add(CLIENT, "client", "development", ["*"], GOOD)
    counting.add(FRONTEND, "frontend", "development", ["*"])
    process = edge(counting.url, [CLIENT])  # the frontend token is asked about when first seen
    seen = ""
    try:
        process.wait_ready()
        good = served(process)
        assert good[0][0] == 200 and b'"second"' in good[1][2]
        for document, path in BAD:
            counting.documents[CLIENT] = document
            before = feature_polls(counting)
            seen += process.read_until(path)
            deadline = time.monotonic() + 30
            while feature_polls(counting) < before + 3:  # met again, silently
                assert time.monotonic() < deadline, "the feed stopped polling"
                time.sleep(0.1)
            assert served(process) == good, path
        assert refused(process)["wrong_type"] >= 3 * len(BAD)  # each poll met a refused document
        counting.documents[CLIENT] = features_doc(("third", "default", True))
        deadline = time.monotonic() + 30
        while b'"third"' not in served(process)[1][2]:
            assert time.monotonic() < deadline, "the good document was never served"
            time.sleep(0.1)
    finally:
        seen += "".join(process.stop())
    said = [line for line in seen.splitlines() if "refused whole" in line and line.startswith("ERROR")]
    assert len(said) == len(BAD), said


def test_an_offline_file_of_the_wrong_type_is_refused_whole(tmp_path: Path) -> None:
    path = tmp_path / "features.json"
    write(path, GOOD)
    process = EdgeProcess(
        ["offline", "--bootstrap-file", str(path), "--client-tokens", CLIENT, "--frontend-tokens", FRONTEND,
         "--reload-interval", "1"]
    )  # fmt: skip
    seen = ""
    try:
        process.wait_ready()
        good = served(process)
        for document, where in BAD:
            write(path, document)
            seen += process.read_until(where)
            time.sleep(2.5)  # two more reloads read it
            assert served(process) == good, where
        # A map of environments is refused whole when one of its documents is.
        write(path, {"development": GOOD, "production": {"version": 2, "features": [{"name": 1}]}})
        seen += process.read_until("environment 'production'")
        assert served(process) == good
        assert refused(process) == {"wrong_type": len(BAD) + 1}  # once per change of the file
    finally:
        seen += "".join(process.stop())
    said = [line for line in seen.splitlines() if "refused whole" in line and line.startswith("ERROR")]
    assert len(said) == len(BAD) + 1, said
