"""A real flag server (SQLite and PostgreSQL) with a real proxy in front: the end-to-end fixtures."""

from tests.demo.conftest import postgres_databases, proxy_factory, server  # noqa: F401  (fixtures)
