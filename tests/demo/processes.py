"""A real `flagproxy proxy` process in front of a real `flagproxy server` process, for end-to-end tests."""

from __future__ import annotations

import http.client
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from tests.server.harness import CLIENT_TOKEN, START_TIMEOUT, free_port, terminate

PROXY_KEY = "e2e-proxy-key"


@dataclass
class ProxyProcess:
    upstream: str  # the server's base URL
    refresh_interval_ms: int = 1000
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    log_path: str | None = None
    backup_dir: str | None = None
    extra_args: tuple[str, ...] = ()  # more `flagproxy proxy` flags

    def start(self) -> ProxyProcess:
        command = [
            sys.executable, "-m", "flagproxy", "proxy", "--host", "127.0.0.1", "--port", str(self.port),
            "--service-url", f"{self.upstream}/api", "--service-api-token", CLIENT_TOKEN,
            "--client-keys", PROXY_KEY, "--refresh-interval", str(self.refresh_interval_ms),
            "--metrics-interval", "60000", *self.extra_args,
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k not in ("PORT", "DATABASE_URL")}
        # A backup folder of its own: a backup another test's proxy left in the shared temp folder would
        # make this one ready with that test's flags until the upstream answers.
        self.backup_dir = env["TMPDIR"] = tempfile.mkdtemp(prefix="proxy-backup-")
        log = open(self.log_path or os.devnull, "wb")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"flagproxy proxy exited with {self.process.returncode}; see {self.log_path}"
                )
            try:
                if self.request("GET", "/proxy/health")[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("flagproxy proxy did not become ready")

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {"Authorization": PROXY_KEY}
            data = None
            if body is not None:
                data = orjson.dumps(body)
                headers["Content-Type"] = "application/json"
            connection.request(method, path, body=data, headers=headers)
            answer = connection.getresponse()
            raw = answer.read()
            content_type = answer.getheader("content-type", "")
            return answer.status, orjson.loads(raw) if raw and "json" in content_type else raw
        finally:
            connection.close()

    def enabled_names(self, query: str = "?userId=1") -> set[str]:
        status, body = self.request("GET", f"/proxy{query}")
        assert status == 200, body
        return {toggle["name"] for toggle in body["toggles"]}

    def stop(self) -> int | None:
        status = None if self.process is None else terminate(self.process)
        if self.backup_dir:
            shutil.rmtree(self.backup_dir, ignore_errors=True)
        return status
