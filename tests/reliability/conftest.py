"""Fixtures of the campaign: main's loopback upstream and process launcher (tests/http/conftest.py), the
server's databases (tests/server/conftest.py), the real `flagproxy server` that edge tests sync with
(tests/edge/conftest.py), and `figures`, where the tests record what they measured."""

from __future__ import annotations

import pytest

import tests.reliability.plugin  # noqa: F401 - counts answers and faults under plain pytest too
from tests.edge.conftest import upstream_server
from tests.http.conftest import base_env, launch, loop_thread, upstream
from tests.reliability.figures import FIGURES, Figures
from tests.server.conftest import backend, backend_env, postgres_databases

__all__ = [
    "backend",
    "backend_env",
    "base_env",
    "launch",
    "loop_thread",
    "postgres_databases",
    "upstream",
    "upstream_server",
]


@pytest.fixture
def figures() -> Figures:
    return FIGURES
