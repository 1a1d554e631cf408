"""The data revision: one counter that every change to served flag data increments, and nothing else does.

The client API keys its precomputed bytes and ETag on it; a server instance sharing the database with
others sees their changes through it too.
"""

from __future__ import annotations

from flagproxy.server.storage.database import Tx


def hold(tx: Tx) -> None:
    """Take the revision row until the transaction ends (PostgreSQL's row lock; SQLite's writers are one at a
    time already): units of work that may change served data then run one after another."""
    tx.execute("UPDATE revision SET value = value WHERE id = 1")


def bump(tx: Tx) -> None:
    tx.execute("UPDATE revision SET value = value + 1 WHERE id = 1")


def current(tx: Tx) -> int:
    return int(tx.value("SELECT value FROM revision WHERE id = 1"))
