"""`flagproxy server --workers 2` stopped by a signal to its whole process group, as systemd's default
KillMode, dumb-init, `tini -g`, `timeout` and terminals send it, or to its main process alone (`kill <pid>`):
in-flight requests finish, exit 0, no traceback (flagproxy/http/serving.py)."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.server.harness import CLIENT_TOKEN, base_env, free_port

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("target", ["group", "main"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_to_the_process_group_under_load_stops_the_server_cleanly(
    tmp_path: Path, signum: int, target: str
) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    command = [sys.executable, "-m", "flagproxy", "server", "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, **base_env(DATABASE_PATH=str(tmp_path / "flags.db"), LOG_LEVEL="info")}
    env.pop("DATABASE_URL", None)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, "--workers", "2"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 30
        while log.read_text().count("Worker ready") < 2:
            assert time.monotonic() < deadline and process.poll() is None, log.read_text()
            time.sleep(0.05)
        answered: list[int] = []
        problems: list[str] = []
        stop = threading.Event()

        def load() -> None:
            while not stop.is_set():
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                try:
                    connection.request("GET", "/api/client/features", headers={"Authorization": CLIENT_TOKEN})
                    response = connection.getresponse()
                    body = response.read()
                    if response.status != 200 or int(response.getheader("content-length", "-1")) != len(body):
                        problems.append(f"{response.status} {body[:80]!r}")
                    answered.append(response.status)
                except (ConnectionRefusedError, ConnectionResetError, http.client.RemoteDisconnected):
                    time.sleep(0.01)  # no longer listening, or closed before answering: nothing was cut
                except Exception as exc:
                    problems.append(repr(exc))
                finally:
                    connection.close()

        threads = [threading.Thread(target=load) for _ in range(4)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        (os.killpg if target == "group" else os.kill)(process.pid, signum)
        process.wait(timeout=30)
        stop.set()
        for thread in threads:
            thread.join(15)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)
    text = log.read_text()
    assert problems == []
    assert len(answered) > 20
    assert process.returncode == 0, text
    assert "Traceback" not in text and "Experienced exception" not in text, text
