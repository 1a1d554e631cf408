"""The first console Admin of a real server: UNLEASH_DEFAULT_ADMIN_USERNAME/PASSWORD at start (only while no
user exists, as Unleash does), `flagproxy server create-admin`, and root roles named by name on the API.
Every case through real processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.server.harness import ADMIN_TOKEN, Api, ServerProcess, assert_error, unique

Fresh = Callable[[str], dict[str, str]]
STRONG = "Fresh-Start-42!"


def _create_admin(env: dict[str, str], password: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flagproxy", "server", "create-admin", *args],
        env={"PATH": "/usr/bin:/bin", **env},
        input=password + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _signs_in_as_admin(api: Api, login: str, password: str) -> None:
    answer = api.post("/auth/simple/login", {"username": login, "password": password}, token=None)
    assert answer.status == 200, answer.body
    assert answer.json()["rootRole"] == 1


def test_the_default_admin_variables_make_the_first_admin_once(
    backend: str, backend_env: Fresh, tmp_path: Path
) -> None:
    database = backend_env(backend)
    log = tmp_path / "server.log"
    env = {
        **database,
        "INIT_ADMIN_API_TOKENS": ADMIN_TOKEN,
        "UNLEASH_DEFAULT_ADMIN_USERNAME": "boss",
        "UNLEASH_DEFAULT_ADMIN_PASSWORD": STRONG,
        "LOG_LEVEL": "debug",
    }
    server = ServerProcess(env, log_path=str(log)).start()
    try:
        _signs_in_as_admin(server.api(None), "boss", STRONG)
        users = server.api().get("/api/admin/user-admin").json()["users"]
        assert [(u["username"], u["rootRole"]) for u in users] == [("boss", 1)]
    finally:
        assert server.stop() == 0
    text = log.read_text()
    assert "created the first Admin 'boss'" in text and STRONG not in text
    # Users exist now: a later start with another password changes nothing (the variables may stay set).
    server = ServerProcess({**env, "UNLEASH_DEFAULT_ADMIN_PASSWORD": "Another-Pass-99?"}).start()
    try:
        _signs_in_as_admin(server.api(None), "boss", STRONG)
        assert len(server.api().get("/api/admin/user-admin").json()["users"]) == 1
    finally:
        assert server.stop() == 0


def test_the_default_admin_is_not_made_when_users_exist(backend: str, backend_env: Fresh) -> None:
    database = backend_env(backend)
    made = _create_admin(database, STRONG, "--email", "first@example.com")
    assert made.returncode == 0, made.stderr
    env = {**database, "UNLEASH_DEFAULT_ADMIN_USERNAME": "boss", "UNLEASH_DEFAULT_ADMIN_PASSWORD": STRONG}
    server = ServerProcess({**env, "INIT_ADMIN_API_TOKENS": ADMIN_TOKEN}).start()
    try:
        users = server.api().get("/api/admin/user-admin").json()["users"]
        assert [u["email"] for u in users] == ["first@example.com"]
    finally:
        assert server.stop() == 0


def test_a_weak_or_half_given_default_admin_stops_the_start(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin:/bin", "DATABASE_PATH": str(tmp_path / "flags.db")}
    cases = [
        (
            {"UNLEASH_DEFAULT_ADMIN_USERNAME": "boss", "UNLEASH_DEFAULT_ADMIN_PASSWORD": "password123"},
            "flagproxy server: UNLEASH_DEFAULT_ADMIN_PASSWORD: the password must contain an uppercase and a "
            "lowercase letter",
        ),
        (
            {"UNLEASH_DEFAULT_ADMIN_USERNAME": "boss"},
            "flagproxy server: UNLEASH_DEFAULT_ADMIN_USERNAME and UNLEASH_DEFAULT_ADMIN_PASSWORD: set both "
            "or neither",
        ),
    ]
    for env, expected in cases:
        finished = subprocess.run(
            [sys.executable, "-m", "flagproxy", "server", "--port", "4999"],
            env={**base, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert finished.returncode == 2, finished.stderr
        assert finished.stderr.strip().splitlines() == [expected]
        assert "password123" not in finished.stderr


def test_create_admin_makes_an_admin_who_signs_in(backend: str, backend_env: Fresh) -> None:
    database = backend_env(backend)
    made = _create_admin(database, STRONG, "--username", "ops", "--email", "ops@example.com", "--name", "Ops")
    assert made.returncode == 0, made.stderr
    assert "created Admin 'ops'" in made.stdout and STRONG not in made.stdout + made.stderr
    # The same name again, a weak password, no name at all: one line each, exit 2, nothing made.
    refusals = [
        (STRONG, ["--username", "ops"], "a user with that username already exists"),
        (STRONG, ["--username", "x", "--email", "OPS@example.com"], "a user with that email already exists"),
        ("short", ["--username", "other"], "the password must be at least 10 characters long"),
        (STRONG, ["--email", "not-an-email"], "'not-an-email' is not an email address"),
        (STRONG, [], "give --username or --email (see --help)"),
    ]
    for password, args, expected in refusals:
        refused = _create_admin(database, password, *args)
        assert refused.returncode == 2, (args, refused.stderr)
        assert refused.stderr.strip().splitlines() == [f"flagproxy server create-admin: {expected}"], args
    server = ServerProcess({**database, "INIT_ADMIN_API_TOKENS": ADMIN_TOKEN}).start()
    try:
        _signs_in_as_admin(server.api(None), "ops", STRONG)
        _signs_in_as_admin(server.api(None), "ops@example.com", STRONG)
        users = server.api().get("/api/admin/user-admin").json()["users"]
        assert [(u["username"], u["name"]) for u in users] == [("ops", "Ops")]
    finally:
        assert server.stop() == 0


def test_create_admin_on_a_database_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    from tests.server.harness import POSTGRES_ADMIN_URL

    url = f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/flagproxy_missing_{unique('db').replace('-', '_')}"
    refused = _create_admin({"DATABASE_URL": url}, STRONG, "--username", "ops")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert refused.stderr.startswith("flagproxy server create-admin: DATABASE_URL: database ")


def test_root_roles_by_name(api: Api) -> None:
    # As Unleash's createUserSchema: rootRole is the role's id or its unique name.
    for role, role_id in (("Admin", 1), ("Editor", 2), ("Viewer", 3), (2, 2)):
        made = api.post("/api/admin/user-admin", {"email": f"{unique('r')}@example.com", "rootRole": role})
        assert made.status == 201, made.body
        assert made.json()["rootRole"] == role_id
    user = made.json()
    changed = api.put(f"/api/admin/user-admin/{user['id']}", {"rootRole": "Viewer"})
    assert changed.status == 200, changed.body
    assert api.get(f"/api/admin/user-admin/{user['id']}").json()["rootRole"] == 3
    for wrong in ("Owner", "admin-ish", 4, 999):  # a project role, no such role
        answer = api.post("/api/admin/user-admin", {"email": f"{unique('r')}@example.com", "rootRole": wrong})
        record = assert_error(answer, 400, "ValidationError", "rootRole")
        assert '"Admin"' in record["message"], record
