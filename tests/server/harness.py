"""Running a real `flagproxy server` process on loopback, and a small HTTP client for it."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import orjson
import psycopg
from psycopg import sql

ADMIN_TOKEN = "*:*.test-admin-secret"
PASSWORD = "Correct-Horse-7-battery"
CLIENT_TOKEN = "*:development.test-client-secret"
PROD_CLIENT_TOKEN = "*:production.test-client-prod-secret"
DEFAULT_PROJECT_CLIENT_TOKEN = "default:development.test-client-default-project-secret"
FRONTEND_TOKEN = "*:development.test-frontend-secret"
POSTGRES_ADMIN_URL = os.environ.get(
    "FLAGPROXY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    all_headers: list[tuple[str, str]] = field(default_factory=list)  # repeated ones too (Set-Cookie)

    def json(self) -> Any:
        return orjson.loads(self.body)

    @property
    def error_name(self) -> str | None:
        return self.json().get("name") if self.body else None


def assert_error(
    answer: Response, status: int, name: str, field: str | None = None, *, context: object = None
) -> dict[str, Any]:
    """`answer` is SPEC.md's error record {id, name, message} with this status and name; a
    ValidationError names the field at fault (`field`) in its message and in details[0].path.
    `context` (say, the request) is shown when it is not."""
    assert answer.status == status, (context, answer.status, answer.body)
    assert answer.headers.get("content-type", "").startswith("application/json"), (context, answer.headers)
    record = answer.json()
    assert record["name"] == name, (context, record)
    assert isinstance(record["id"], str) and record["id"], (context, record)
    assert isinstance(record["message"], str) and record["message"], (context, record)
    if field is not None:
        assert f'"{field}"' in record["message"] and record["details"][0]["path"] == field, (context, record)
    return record


def _cookies(answer: Response) -> dict[str, str]:
    found = {}
    for name, value in answer.all_headers:
        if name == "set-cookie":
            cookie_name, _, rest = value.partition("=")
            found[cookie_name.strip()] = rest.split(";", 1)[0]
    return found


@dataclass
class Session:
    """A signed-in browser: the session cookie on every request, the CSRF token on changes."""

    port: int
    cookie: str
    csrf: str
    user: dict[str, Any]

    def request(self, method: str, path: str, json: Any = None, *, csrf: bool = True) -> Response:
        headers = {"Cookie": f"flagproxy_session={self.cookie}; flagproxy_csrf={self.csrf}"}
        if csrf and method not in ("GET", "HEAD"):
            headers["X-CSRF-Token"] = self.csrf
        return Api(self.port, None).request(method, path, json, headers=headers)


@dataclass
class Api:
    """Requests against one server; JSON in, Response out. `token=None` sends no Authorization."""

    port: int
    token: str | None = ADMIN_TOKEN

    def request(
        self,
        method: str,
        path: str,
        json: Any = None,
        *,
        token: str | type[Ellipsis] | None = ...,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        sent = dict(headers or {})
        chosen = self.token if token is ... else token
        if chosen is not None:
            sent.setdefault("Authorization", chosen)
        if json is not None:
            body = orjson.dumps(json)
            sent.setdefault("Content-Type", "application/json")
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=sent)
            answer = connection.getresponse()
            pairs = [(k.lower(), v) for k, v in answer.getheaders()]
            return Response(answer.status, dict(pairs), answer.read(), pairs)
        finally:
            connection.close()

    def get(self, path: str, **kwargs: Any) -> Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, json: Any = None, **kwargs: Any) -> Response:
        return self.request("POST", path, json, **kwargs)

    def put(self, path: str, json: Any = None, **kwargs: Any) -> Response:
        return self.request("PUT", path, json, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Response:
        return self.request("DELETE", path, **kwargs)

    # --- authoring shortcuts ------------------------------------------------------------------------

    def create_feature(self, name: str, project: str = "default", **fields: Any) -> dict[str, Any]:
        answer = self.post(f"/api/admin/projects/{project}/features", {"name": name, **fields})
        assert answer.status == 201, answer.body
        return answer.json()

    def add_strategy(
        self,
        feature: str,
        strategy: dict[str, Any],
        environment: str = "development",
        project: str = "default",
    ) -> dict[str, Any]:
        path = f"/api/admin/projects/{project}/features/{feature}/environments/{environment}/strategies"
        answer = self.post(path, strategy)
        assert answer.status == 200, answer.body
        return answer.json()

    def switch(
        self, feature: str, on: bool, environment: str = "development", project: str = "default"
    ) -> None:
        path = f"/api/admin/projects/{project}/features/{feature}/environments/{environment}/"
        answer = self.post(path + ("on" if on else "off"))
        assert answer.status == 200, answer.body

    def create_segment(self, name: str, constraints: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
        answer = self.post("/api/admin/segments", {"name": name, "constraints": constraints, **fields})
        assert answer.status == 201, answer.body
        return answer.json()

    # --- people -----------------------------------------------------------------------------------------

    def create_user(self, root_role: int = 3, password: str = PASSWORD, **fields: Any) -> dict[str, Any]:
        """A new user with a unique email (and `password`); returns the User."""
        email = fields.pop("email", f"{unique('u')}@example.com")
        answer = self.post(
            "/api/admin/user-admin", {"email": email, "password": password, "rootRole": root_role, **fields}
        )
        assert answer.status == 201, answer.body
        return answer.json()

    def login(self, login: str, password: str = PASSWORD) -> Session:
        answer = self.post("/auth/simple/login", {"username": login, "password": password}, token=None)
        assert answer.status == 200, answer.body
        cookies = _cookies(answer)
        return Session(self.port, cookies["flagproxy_session"], cookies["flagproxy_csrf"], answer.json())

    def personal_token(self, login: str, password: str = PASSWORD) -> str:
        """A personal access token of the user `login`, made through a session as a person would."""
        session = self.login(login, password)
        answer = session.request(
            "POST", "/api/admin/user/tokens", {"description": "test", "expiresAt": "2099-01-01T00:00:00Z"}
        )
        assert answer.status == 201, answer.body
        return str(answer.json()["secret"])

    def user_with_token(self, root_role: int = 3, **fields: Any) -> tuple[dict[str, Any], str]:
        user = self.create_user(root_role, **fields)
        return user, self.personal_token(user["email"])

    def listed_feature(self, name: str, project: str = "default") -> dict[str, Any]:
        answer = self.get(f"/api/admin/projects/{project}/features?namePrefix={quote(name)}")
        assert answer.status == 200, answer.body
        return next(f for f in answer.json()["features"] if f["name"] == name)

    def client_features(self, token: str = CLIENT_TOKEN, query: str = "", spec: str | None = "5.0.0") -> dict:
        headers = {"Unleash-Client-Spec": spec} if spec else {}
        answer = self.get(f"/api/client/features{query}", token=token, headers=headers)
        assert answer.status == 200, answer.body
        return answer.json()


@dataclass
class ServerProcess:
    """`python -m flagproxy server` as a child process, stopped with SIGTERM. The port is given with
    `--port`, or in the PORT environment variable when `port_from_env` is set."""

    env: dict[str, str]
    args: list[str] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    log_path: str | None = None
    port_from_env: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, token: str | None = ADMIN_TOKEN) -> Api:
        return Api(self.port, token)

    def start(self) -> ServerProcess:
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        if "DATABASE_URL" not in self.env:
            env.pop("DATABASE_URL", None)  # an outer DATABASE_URL must not redirect a SQLite test
        command = [sys.executable, "-m", "flagproxy", "server", "--host", "127.0.0.1"]
        if self.port_from_env:
            env["PORT"] = str(self.port)
        else:
            env.pop("PORT", None)
            command += ["--port", str(self.port)]
        log = open(self.log_path or os.devnull, "wb")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen([*command, *self.args], env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"flagproxy server exited with {self.process.returncode}; see {self.log_path}"
                )
            try:
                if Api(self.port, None).get("/health").status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"flagproxy server did not answer /health within {START_TIMEOUT}s")

    def stop(self) -> int | None:
        return None if self.process is None else terminate(self.process)


def terminate(process: subprocess.Popen, timeout: float = 15) -> int:
    """SIGTERM, then SIGKILL if it has not exited within `timeout`; the exit code (-9 means it hung)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    return process.returncode


def base_env(**extra: str) -> dict[str, str]:
    return {
        "INIT_ADMIN_API_TOKENS": ADMIN_TOKEN,
        "INIT_CLIENT_API_TOKENS": f"{CLIENT_TOKEN},{PROD_CLIENT_TOKEN},{DEFAULT_PROJECT_CLIENT_TOKEN}",
        "INIT_FRONTEND_API_TOKENS": FRONTEND_TOKEN,
        **extra,
    }


class PostgresDatabases:
    """Creates uniquely named databases for one test session and drops them all at the end."""

    def __init__(self, admin_url: str = POSTGRES_ADMIN_URL) -> None:
        self.admin_url = admin_url
        self.session_tag = f"flagproxy_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self.created: list[str] = []

    def create(self) -> str:
        name = f"{self.session_tag}_{len(self.created)}"
        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=10) as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self.created.append(name)
        base = self.admin_url.rsplit("/", 1)[0]
        return f"{base}/{name}"

    def drop_all(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=10) as connection:
            for name in self.created:
                connection.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
        self.created.clear()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
