"""Pure pieces of the server: settings, token formats, variant weights, the client payload cache, stream
messages shared by the streams of one scope."""

from __future__ import annotations

import pytest

from flagproxy.http.delta import Batch, DeltaEvent, Pick, document, message_for, scoped, sse
from flagproxy.server.authoring import fix_variant_weights
from flagproxy.server.client_features import ClientPayload, ClientQuery, PayloadCache
from flagproxy.server.errors import ValidationFailed
from flagproxy.server.routes.client import segments_by_reference
from flagproxy.server.settings import ServerSettings, SettingsError
from flagproxy.server.storage.catalog import Catalog
from flagproxy.server.tokens import new_secret, parse_init_token
from flagproxy.server.validation import field_path
from flagproxy.tokens import hex_digest, strip_bearer


def test_settings_from_env_and_argv() -> None:
    settings = ServerSettings.load(
        {"PORT": "8080", "INIT_ADMIN_API_TOKENS": " *:*.a , *:*.b ", "DATABASE_URL": ""},
        ["--database", "/tmp/x.db"],
    )
    assert settings.port == 8080 and settings.database_path == "/tmp/x.db" and settings.database_url is None
    assert settings.init_admin_tokens == ("*:*.a", "*:*.b")
    assert ServerSettings.load({"PORT": "8080"}, ["--port", "9000"]).port == 9000
    assert ServerSettings.load({}, []).port == 4242
    with pytest.raises(SettingsError, match="PORT"):
        ServerSettings.load({"PORT": "0"}, [])


def test_init_token_formats() -> None:
    assert parse_init_token("*:*.secret", "admin") == (("*",), "*")
    assert parse_init_token("default:development.x.y", "client") == (("default",), "development")
    assert parse_init_token("*:production.x", "frontend") == (("*",), "production")
    for bad in ("secret", "default.x", "default:development.", "[]:development.x", ":development.x"):
        with pytest.raises(ValueError):
            parse_init_token(bad, "client")
    with pytest.raises(ValueError, match="one environment"):
        parse_init_token("default:*.x", "client")


def test_secrets_and_headers() -> None:
    assert new_secret(("default",), "development").startswith("default:development.")
    assert new_secret(("a", "b"), "production").startswith("[]:production.")
    assert len(new_secret(("*",), "x").split(".", 1)[1]) == 56
    assert hex_digest("a") != hex_digest("b") and len(hex_digest("a")) == 64
    assert strip_bearer("Bearer abc ") == "abc" and strip_bearer("abc") == "abc"


def _variants(*specs: tuple[str, int]) -> list[dict]:
    return [{"name": str(i), "weightType": kind, "weight": weight} for i, (kind, weight) in enumerate(specs)]


def test_fix_variant_weights_like_unleash() -> None:
    weights = [
        v["weight"] for v in fix_variant_weights(_variants(("variable", 0), ("variable", 0), ("variable", 0)))
    ]
    assert weights == [334, 333, 333]
    weights = [
        v["weight"] for v in fix_variant_weights(_variants(("fix", 100), ("variable", 5), ("variable", 9)))
    ]
    assert weights == [100, 450, 450]
    weights = [v["weight"] for v in fix_variant_weights(_variants(*[("variable", 0)] * 7))]
    assert weights == [143, 143, 143, 143, 143, 143, 142] and sum(weights) == 1000
    assert fix_variant_weights([]) == []
    with pytest.raises(ValidationFailed):
        fix_variant_weights(_variants(("fix", 600), ("fix", 600), ("variable", 0)))
    with pytest.raises(ValidationFailed):
        fix_variant_weights(_variants(("fix", 600)))


def test_field_paths() -> None:
    assert field_path(("constraints", 0, "operator")) == "constraints[0].operator"
    assert field_path(("bucket", "toggles", "f", "yes")) == "bucket.toggles.f.yes"
    assert field_path(()) == "body"


def test_client_spec_header() -> None:
    assert segments_by_reference("5.1.9") and segments_by_reference("4.2.0")
    assert not segments_by_reference("4.1.0") and not segments_by_reference(None)
    assert not segments_by_reference("garbage")


def test_payload_cache_is_bounded_and_per_revision() -> None:
    cache = PayloadCache(max_entries=2)
    catalog = Catalog(environments=[], features=[])
    queries = [ClientQuery(projects=None, environment=f"e{i}") for i in range(3)]
    for query in queries:
        cache.put(query, ClientPayload(1, b"{}", '"x"'), catalog)
    assert cache.get(queries[0], 1) is None  # evicted
    assert cache.get(queries[2], 1) is not None
    assert cache.get(queries[2], 2) is None  # another revision
    assert cache.catalog_for(1) is catalog and cache.catalog_for(2) is None


def _feature_event(event_id: int, name: str, project: str = "default") -> DeltaEvent:
    wire = b'{"eventId":%d,"type":"feature-updated","feature":{"name":"%s"}}' % (event_id, name.encode())
    return DeltaEvent(event_id, "development", name, project, frozenset(), None, frozenset(), wire, None)


def test_streams_of_one_scope_share_a_batch_message_rendered_once() -> None:
    # Ten thousand streams of one token render a change once; each scope and position gets its own.
    batch = Batch([_feature_event(7, "a"), _feature_event(8, "b", project="other")], upto=8)
    picked: list[tuple[ClientQuery, int]] = []

    def pick_for(query: ClientQuery) -> Pick:
        def pick(batch: Batch, position: int) -> tuple[list[bytes], int, int]:
            picked.append((query, position))
            wires, last = scoped(batch.events, query, position)
            return wires, last, max(position, batch.upto)

        return pick

    everything = ClientQuery(projects=None, environment="development")
    default_only = ClientQuery(projects=("default",), environment="development")
    both = document([event.updated or b"" for event in batch.events])
    first = message_for(batch, 6, pick_for(everything), everything)
    assert first == (sse("unleash-updated", both, 8), 8)
    again = message_for(batch, 6, pick_for(everything), ClientQuery(projects=None, environment="development"))
    assert again is not None and again[0] is first[0] and picked == [(everything, 6)]
    first_only = sse("unleash-updated", document([batch.events[0].updated or b""]), 7)
    assert message_for(batch, 6, pick_for(default_only), default_only) == (first_only, 8)
    # A stream that already has part of the batch (a catch-up overlapped it) gets only the rest.
    second_only = sse("unleash-updated", document([batch.events[1].updated or b""]), 8)
    assert message_for(batch, 7, pick_for(everything), everything) == (second_only, 8)
    assert message_for(batch, 8, pick_for(everything), everything) == (None, 8)
    # Without a key nothing is shared: each stream picks for itself.
    picked.clear()
    message_for(batch, 6, pick_for(everything), None)
    message_for(batch, 6, pick_for(everything), None)
    assert picked == [(everything, 6), (everything, 6)]
