"""`flagproxy demo`: starts both parts with sample flags, prints how to use them, stops cleanly on Ctrl-C."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import urllib.request

import orjson
import pytest

from tests.server.harness import free_port

READY_LINE = "Ctrl-C stops both."


def _get(url: str, key: str, body: dict | None = None) -> dict:
    data = None if body is None else orjson.dumps(body)
    request = urllib.request.Request(url, data=data, headers={"Authorization": key})
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return orjson.loads(answer.read())


@pytest.mark.slow
def test_demo_runs_both_parts_and_stops_on_ctrl_c() -> None:
    server_port, proxy_port = free_port(), free_port()
    demo = subprocess.Popen(
        [sys.executable, "-m", "flagproxy", "demo", "--server-port", str(server_port),
         "--proxy-port", str(proxy_port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    try:
        assert demo.stdout is not None
        output = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = demo.stdout.readline()
            if not line:
                break
            output.append(line)
            if READY_LINE in line:
                break
        text = "".join(output)
        assert READY_LINE in text, text
        key = re.search(r"proxy key\s+(\S+)", text).group(1)
        admin = re.search(r"admin token\s+(\S+)", text).group(1)
        assert text.count("curl ") == 3
        proxy = f"http://127.0.0.1:{proxy_port}/proxy"

        alice = {t["name"]: t for t in _get(f"{proxy}?userId=alice", key)["toggles"]}
        assert "beta-banner" in alice and "payments-kill-switch" not in alice
        assert alice["dark-mode"]["variant"]["enabled"] is True
        carol = _get(
            proxy,
            key,
            {
                "context": {
                    "userId": "carol",
                    "properties": {"plan": "premium", "country": "NO", "version": "2.1.0"},
                }
            },
        )
        assert "premium-search" in {t["name"] for t in carol["toggles"]}
        on = urllib.request.Request(
            f"http://127.0.0.1:{server_port}/api/admin/projects/default/features/payments-kill-switch"
            "/environments/development/on",
            method="POST",
            headers={"Authorization": admin},
        )
        with urllib.request.urlopen(on, timeout=10) as answer:
            assert answer.status == 200
        deadline = time.monotonic() + 5
        while "payments-kill-switch" not in {t["name"] for t in _get(f"{proxy}?userId=x", key)["toggles"]}:
            assert time.monotonic() < deadline, "the proxy never showed the change"
            time.sleep(0.1)

        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=30) == 0
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(timeout=10)
        if demo.stdout is not None:
            demo.stdout.close()
    for port in (server_port, proxy_port):
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
