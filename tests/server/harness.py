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
            return Response(answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read())
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
