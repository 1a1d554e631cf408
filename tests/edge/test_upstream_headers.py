"""Edge's header options through a real `flagproxy edge` process: --custom-client-headers on every upstream
request (validation, features, usage), --upstream-auth-header for the header edge's token goes upstream
in, --edge-auth-header and --token-header for the header clients send theirs in. The counting upstream
records every request's headers."""

from __future__ import annotations

from tests.edge.harness import CountingUpstream, edge, features_doc

DEV_CLIENT = "*:development.header-client-secret"
DEV_FRONTEND = "*:development.header-frontend-secret"
BUCKET = {
    "appName": "web",
    "instanceId": "i-1",
    "bucket": {"start": "2026-01-01T00:00:00Z", "stop": "2026-01-01T00:01:00Z", "toggles": {"f": {"yes": 2}}},
}


def _seed(counting: CountingUpstream) -> None:
    counting.add(DEV_CLIENT, "client", "development", ["*"], features_doc(("f", "default", True)))
    counting.add(DEV_FRONTEND, "frontend", "development", ["*"])


def test_custom_headers_and_the_upstream_auth_header_go_with_every_upstream_request(
    counting: CountingUpstream,
) -> None:
    _seed(counting)
    counting.token_header = "X-Unleash-Token"
    process = edge(
        counting.url, [DEV_CLIENT], "--metrics-interval-seconds", "1",
        "-H", "X-Api-Key: gateway-secret", "--custom-client-headers", "X-Team:flags,X-Region : eu-1",
        "--upstream-auth-header", "X-Unleash-Token",
    )  # fmt: skip
    try:
        process.wait_ready()
        assert process.get("/api/frontend", DEV_FRONTEND)[0] == 200
        assert process.post("/api/client/metrics", DEV_CLIENT, BUCKET)[0] == 202
        usage = counting.wait_for("/api/client/metrics/bulk", timeout=15)
        features = counting.received("/api/client/features")
        assert features and usage and counting.validate_headers
        for headers in [r["headers"] for r in features + usage] + counting.validate_headers:
            assert headers["x-api-key"] == "gateway-secret"
            assert headers["x-team"] == "flags" and headers["x-region"] == "eu-1"
            assert "authorization" not in headers
        for request in features + usage:
            assert request["headers"]["x-unleash-token"] == DEV_CLIENT
        assert "x-unleash-token" not in counting.validate_headers[0]  # /edge/validate carries no token
    finally:
        process.stop()


def test_a_custom_header_of_the_token_headers_name_replaces_the_token(counting: CountingUpstream) -> None:
    # As Edge's header_map inserts the custom headers after the token: an API gateway's own credential.
    _seed(counting)
    counting.token_header = "X-Gateway"
    process = edge(counting.url, [DEV_CLIENT], "-H", "authorization: gateway-credential")
    try:
        process.wait_listening()
        features = counting.wait_for("/api/client/features", timeout=15)
        assert features[0]["headers"]["authorization"] == "gateway-credential"
    finally:
        process.stop()


def test_clients_send_their_token_in_the_edge_auth_header(counting: CountingUpstream) -> None:
    _seed(counting)
    process = edge(counting.url, [DEV_CLIENT], env={"EDGE_AUTH_HEADER": "X-Edge-Token"})
    try:
        process.wait_ready()
        assert process.get("/api/frontend", headers={"X-Edge-Token": DEV_FRONTEND})[0] == 200
        assert process.get("/api/client/features", headers={"x-edge-token": DEV_CLIENT})[0] == 200
        assert process.get("/api/frontend", DEV_FRONTEND)[0] == 401  # Authorization is not read
        # upstream, the token still goes in Authorization
        assert counting.received("/api/client/features")[0]["headers"]["authorization"] == DEV_CLIENT
    finally:
        process.stop()


def test_the_token_header_is_both_sides_header(counting: CountingUpstream) -> None:
    _seed(counting)
    counting.token_header = "X-Token"
    process = edge(counting.url, [DEV_CLIENT], "--token-header", "X-Token")
    try:
        process.wait_ready()
        status, _, body = process.get("/api/frontend", headers={"X-Token": DEV_FRONTEND})
        assert status == 200 and b'"f"' in body
        assert process.get("/api/frontend", DEV_FRONTEND)[0] == 401
        features = counting.received("/api/client/features")
        assert (
            features[0]["headers"]["x-token"] == DEV_CLIENT and "authorization" not in features[0]["headers"]
        )
    finally:
        process.stop()
