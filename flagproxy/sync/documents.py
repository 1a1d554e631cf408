"""What counts as a features document, in one place: the fetch (upstream.py), the store that compiles it
(flagproxy/instance/store.py) and edge's offline files all ask this, and it imports nothing heavy, so a worker
that only installs documents does not load the HTTP client for it."""

from __future__ import annotations

from typing import Any


def is_features_document(document: Any) -> bool:
    """A client API features document, or a delta document (`events`) as Unleash's delta API sends."""
    return isinstance(document, dict) and (
        isinstance(document.get("features"), list) or isinstance(document.get("events"), list)
    )
