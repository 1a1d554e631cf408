"""The database interface the stores use, with a SQLite and a PostgreSQL implementation.

Calls are synchronous: the server's database work is cold-path authoring and small indexed reads, and
the client API answers from precomputed bytes, so a short blocking query costs less than the machinery
an async driver pair would add. Each `transaction()` is one unit of work; stores receive its `Tx`.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

Row = dict[str, Any]

CONNECT_TIMEOUT = 5  # seconds a start waits for PostgreSQL before saying it cannot reach it


class DatabaseUnavailable(Exception):
    """The database the settings name cannot be opened; the message says what is wrong and what to do,
    never a password."""


class Tx:
    """One open transaction: run statements and read rows as dicts."""

    def __init__(self, cursor: Any, placeholder: str, dialect: str) -> None:
        self._cursor = cursor
        self._placeholder = placeholder
        self.dialect = dialect

    def _sql(self, sql: str) -> str:
        # Statements are written with `?`; PostgreSQL wants `%s`. No statement contains a literal `?` or `%`.
        return sql if self._placeholder == "?" else sql.replace("?", "%s")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a statement; return the number of rows it changed."""
        self._cursor.execute(self._sql(sql), tuple(params))
        return self._cursor.rowcount

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        self._cursor.execute(self._sql(sql), tuple(params))
        names = [column[0] for column in self._cursor.description]
        return [dict(zip(names, values, strict=True)) for values in self._cursor.fetchall()]

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        rows = self.all(sql, params)
        return rows[0] if rows else None

    def value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self.one(sql, params)
        return None if row is None else next(iter(row.values()))

    def update(self, table: str, where: tuple[str, Any], changes: dict[str, Any], allowed: set[str]) -> None:
        """`UPDATE table SET <changes> WHERE column = value`. Table and column names are fixed by the
        caller, never user input; `allowed` keeps anything else out of the statement."""
        columns = [column for column in changes if column in allowed]
        if not columns:
            return
        assignments = ", ".join(f"{column} = ?" for column in columns)
        key_column, key = where
        values = [changes[column] for column in columns]
        self.execute(f"UPDATE {table} SET {assignments} WHERE {key_column} = ?", [*values, key])


class Database:
    """What the stores need from a backend."""

    dialect: str

    @contextmanager
    def transaction(self, *, read_only: bool = False) -> Iterator[Tx]:  # pragma: no cover - interface
        """One unit of work; `read_only` lets SQLite readers run side by side (no write lock at BEGIN)."""
        raise NotImplementedError
        yield

    def close(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


def _use_wal(connection: sqlite3.Connection, patience: float = 30.0) -> None:
    """Switch a new file to WAL (a lasting property of the file). Switching needs the file to itself, and
    SQLite answers "database is locked" at once, without its busy handler, when another process opens the same
    new file at that moment (`flagproxy server --workers N` on a fresh database), so wait for it here."""
    deadline = time.monotonic() + patience
    while True:
        try:
            if connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                return
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class SqliteDatabase(Database):
    """A SQLite file. One connection per thread; writers take the lock at BEGIN (no upgrade deadlocks)."""

    dialect = "sqlite"

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:  # at once, so a path that cannot work stops the start with one line, not a first request
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._connection()
        except (OSError, sqlite3.Error) as exc:
            self.close()
            raise DatabaseUnavailable(f"cannot open the SQLite file {self.path}: {exc}") from None

    def _connection(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            # isolation_level=None: we issue BEGIN/COMMIT ourselves.
            connection = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            connection.execute("PRAGMA busy_timeout=30000")
            _use_wal(connection)
            connection.execute("PRAGMA foreign_keys=ON")
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    @contextmanager
    def transaction(self, *, read_only: bool = False) -> Iterator[Tx]:
        connection = self._connection()
        cursor = connection.cursor()
        cursor.execute("BEGIN" if read_only else "BEGIN IMMEDIATE")
        try:
            yield Tx(cursor, "?", "sqlite")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        else:
            connection.execute("COMMIT")
        finally:
            cursor.close()

    def close(self) -> None:
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()
        self._local = threading.local()


class PostgresDatabase(Database):
    """A PostgreSQL database reached through a small psycopg connection pool."""

    dialect = "postgres"

    def __init__(self, url: str, *, max_connections: int = 8) -> None:
        from psycopg_pool import ConnectionPool

        self.url = url
        _probe(url)
        # Each connection is checked as it is handed out (one empty round trip): after PostgreSQL restarts,
        # or an administrator ends the server's backends, the pool replaces dead connections instead of
        # failing one request on each of them.
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max_connections,
            open=True,
            timeout=30,
            check=ConnectionPool.check_connection,
        )

    @contextmanager
    def transaction(self, *, read_only: bool = False) -> Iterator[Tx]:
        # READ COMMITTED either way; `read_only` matters only to SQLite's locking.
        with self._pool.connection() as connection, connection.transaction(), connection.cursor() as cursor:
            yield Tx(cursor, "%s", "postgres")

    def close(self) -> None:
        self._pool.close()


def _probe(url: str) -> None:
    """Connect once, quickly, before the pool does: the pool would retry for 30 s and end in a traceback.
    A database that does not exist yet is not created (a typo in the URL would quietly make a second,
    empty one); the message says how to create it."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        where = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise DatabaseUnavailable(f"not a PostgreSQL URL: {_first_line(exc)}") from None
    host, port = where.get("host") or "localhost", where.get("port") or "5432"
    user, name = where.get("user") or "the current user", where.get("dbname") or "(none)"
    try:
        psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT).close()
    except psycopg.Error as exc:
        reason = _first_line(exc)
        if f'database "{name}" does not exist' in reason:
            raise DatabaseUnavailable(
                f'database "{name}" does not exist on {host}:{port}; create it first '
                f"(createdb -h {host} -p {port} -U {where.get('user') or '<user>'} {name}, "
                f'or CREATE DATABASE "{name}" in psql), then start again'
            ) from None
        raise DatabaseUnavailable(
            f"cannot connect to PostgreSQL at {host}:{port} (database {name}, user {user}): {reason}"
        ) from None


def _first_line(exc: Exception) -> str:
    """psycopg's reason without its "connection failed: connection to server at ... failed:" preamble."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = text.removeprefix("connection failed: ").removeprefix("connection is bad: ")
    if text.startswith("connection to server at ") and " failed: " in text:
        text = text.split(" failed: ", 1)[1]
    return text.replace("FATAL:  ", "").strip()


def open_database(database_url: str | None, sqlite_path: str | Path) -> Database:
    """DATABASE_URL `postgresql://...` (or `postgres://...`) means PostgreSQL; unset means the SQLite file."""
    if database_url:
        if database_url.startswith(("postgresql://", "postgres://")):
            return PostgresDatabase(database_url)
        if database_url.startswith("sqlite:///"):
            return SqliteDatabase(database_url.removeprefix("sqlite:///"))
        raise ValueError(f"DATABASE_URL must start with postgresql:// or sqlite:///, got {database_url!r}")
    return SqliteDatabase(sqlite_path)
