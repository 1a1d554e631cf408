"""`flagproxy server` refuses a setting that cannot work with one line naming it as the user wrote it, and
exit status 2, quickly: a database that does not exist yet, an unreachable database host, a SQLite path
that cannot be a file, a port another program holds, a bad flag."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from pathlib import Path

from tests.server.harness import POSTGRES_ADMIN_URL, free_port


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flagproxy", "server", "--host", "127.0.0.1", *args],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _one_line(finished: subprocess.CompletedProcess[str]) -> str:
    assert finished.returncode == 2, (finished.returncode, finished.stderr)
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in finished.stderr, finished.stderr
    return lines[0]


def test_a_database_that_does_not_exist_is_named_with_how_to_create_it() -> None:
    name = f"flagproxy_missing_{uuid.uuid4().hex[:8]}"
    url = f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    line = _one_line(_run({"DATABASE_URL": url}, "--port", str(free_port())))
    assert line.startswith(f'flagproxy server: DATABASE_URL: database "{name}" does not exist on '), line
    assert f"createdb -h 127.0.0.1 -p 5432 -U postgres {name}" in line, line
    # Named as the user wrote it: the flag when the flag gave it.
    line = _one_line(_run({}, "--database-url", url, "--port", str(free_port())))
    assert line.startswith(f'flagproxy server: --database-url: database "{name}" does not exist'), line


def test_an_unreachable_database_host_is_one_line() -> None:
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    line = _one_line(
        _run({"DATABASE_URL": f"postgresql://postgres:s3cret-pw@127.0.0.1:{port}/flags"}, "--port", "4999")
    )
    assert line == (
        f"flagproxy server: DATABASE_URL: cannot connect to PostgreSQL at 127.0.0.1:{port} "
        "(database flags, user postgres): Connection refused"
    )
    assert "s3cret-pw" not in line


def test_a_sqlite_path_that_cannot_be_a_file_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    line = _one_line(_run({}, "--database", str(blocker / "flags.db"), "--port", str(free_port())))
    assert line.startswith(f"flagproxy server: --database: cannot open the SQLite file {blocker}/flags.db: ")


def test_a_taken_port_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        database = str(tmp_path / "flags.db")
        line = _one_line(_run({"DATABASE_PATH": database}, "--port", str(port)))
        assert line == f"flagproxy server: --port: cannot listen on 127.0.0.1:{port}: Address already in use"
        line = _one_line(_run({"DATABASE_PATH": database, "PORT": str(port)}))
        assert line == f"flagproxy server: PORT: cannot listen on 127.0.0.1:{port}: Address already in use"


def test_bad_flags_and_values_name_the_option_as_written(tmp_path: Path) -> None:
    env = {"DATABASE_PATH": str(tmp_path / "flags.db")}
    cases = [
        (["--bogus"], {}, "flagproxy server: unrecognized arguments: --bogus (see --help)"),
        (["--port", "abc"], {}, "flagproxy server: --port: must be a whole number, got 'abc'"),
        (["--port", "70000"], {}, "flagproxy server: --port: must be 1-65535, got 70000"),
        ([], {"PORT": "70000"}, "flagproxy server: PORT: must be 1-65535, got 70000"),
        (["--workers", "0"], {}, "flagproxy server: --workers: must be at least 1, got 0"),
        ([], {"WORKERS": "many"}, "flagproxy server: WORKERS: must be a whole number, got 'many'"),
        (["--log-level", "loud"], {}, "flagproxy server: --log-level: must be debug, info, warn or error, "
         "got 'loud'"),
        ([], {"DATABASE_URL": "mysql://x"}, "flagproxy server: DATABASE_URL: must start with postgresql:// "
         "(or sqlite:///)"),
    ]  # fmt: skip
    for args, extra, expected in cases:
        assert _one_line(_run({**env, **extra}, *args)) == expected, (args, extra)
