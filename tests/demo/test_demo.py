"""`flagproxy demo`: starts both parts on a fresh SQLite file with sample flags, prints the URLs, the keys,
the status page and four curl commands that show evaluation, and stops both cleanly on Ctrl-C. It is the
README's first command."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.demo.timing import wait_for_propagation
from tests.server.harness import free_port

READY_LINE = "Ctrl-C stops both."
REFRESH_MS = 1000
SAMPLE_FLAGS = {
    "new-checkout", "beta-banner", "dark-mode", "premium-search", "checkout-upsell", "payments-kill-switch",
    "welcome-banner",
}  # fmt: skip
README = Path(__file__).resolve().parents[2] / "README.md"


def _call(url: str, key: str, body: dict | None = None) -> Any:
    data = None if body is None else orjson.dumps(body)
    request = urllib.request.Request(url, data=data, headers={"Authorization": key})
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return orjson.loads(answer.read())


def _curl_commands(text: str) -> list[str]:
    """The printed curl commands, continuation lines joined."""
    commands: list[str] = []
    lines = iter(text.splitlines())
    for line in lines:
        if not line.strip().startswith("curl "):
            continue
        command = line.strip()
        while command.endswith("\\"):
            command = command[:-1] + " " + next(lines).strip()
        commands.append(command)
    return commands


def _run_curl(command: str) -> bytes:
    finished = subprocess.run(["bash", "-c", command + " --silent --show-error --fail"], capture_output=True)
    assert finished.returncode == 0, (command, finished.stderr)
    return finished.stdout


def _read_until_ready(demo: subprocess.Popen[str]) -> str:
    assert demo.stdout is not None
    output = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = demo.stdout.readline()
        if not line:
            break
        output.append(line)
        if READY_LINE in line:
            break
    return "".join(output)


def _field(text: str, label: str) -> str:
    found = re.search(rf"^\s+{label}\s{{2,}}(\S+)", text, re.MULTILINE)
    assert found, (label, text)
    return found.group(1)


def _check_samples(server: str, admin_token: str) -> None:
    """The fresh database holds exactly the sample flags, with what the issue promises."""
    listed = _call(f"{server}/api/admin/projects/default/features", admin_token)["features"]
    assert {f["name"] for f in listed} == SAMPLE_FLAGS
    strategies = [s for f in listed for s in f["environments"][0]["strategies"]]
    rollouts = [int(s["parameters"]["rollout"]) for s in strategies if s["name"] == "flexibleRollout"]
    assert any(rollout < 100 for rollout in rollouts)  # a gradual rollout
    assert any(s["constraints"] for s in strategies)
    assert any(s["segments"] for s in strategies)
    assert len(_call(f"{server}/api/admin/segments", admin_token)["segments"]) >= 1
    assert any(v.get("payload") for s in strategies for v in s["variants"])  # variants with payloads
    assert any(f["dependencies"] for f in listed)


@pytest.mark.slow
def test_demo_runs_both_parts_and_stops_on_ctrl_c() -> None:
    server_port, proxy_port = free_port(), free_port()
    demo = subprocess.Popen(
        [sys.executable, "-m", "flagproxy", "demo", "--server-port", str(server_port),
         "--proxy-port", str(proxy_port), "--refresh-interval", str(REFRESH_MS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own process group, so Ctrl-C can be sent as a terminal sends it
    )  # fmt: skip
    try:
        text = _read_until_ready(demo)
        assert READY_LINE in text, text
        server, proxy = f"http://127.0.0.1:{server_port}", f"http://127.0.0.1:{proxy_port}"
        assert _field(text, "flag server") == server and _field(text, "proxy") == f"{proxy}/proxy"
        key, admin = _field(text, "proxy key"), _field(text, "admin token")
        # The invite link works: a colleague signs up through it as a Viewer.
        invite = _field(text, "invite link")
        assert invite.startswith(f"{server}/new-user?invite=")
        secret = invite.rsplit("=", 1)[1]
        signup = urllib.request.Request(
            f"{server}/invite/{secret}/signup",
            data=orjson.dumps({"email": "colleague@example.com", "name": "Col", "password": "Demo-pass-123"}),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(signup, timeout=10) as answer:
            assert answer.status == 200 and orjson.loads(answer.read())["rootRole"] == 3
        # The console answers, and the printed login signs in to it.
        assert _field(text, "console") == f"{server}/console"
        login = {"username": _field(text, "login"), "password": _field(text, "password")}
        signin = urllib.request.Request(
            f"{server}/auth/simple/login",
            data=orjson.dumps(login),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(signin, timeout=10) as answer:
            assert answer.status == 200 and orjson.loads(answer.read())["rootRole"] == 1
            cookies = [c.split(";", 1)[0] for c in answer.headers.get_all("set-cookie")]
            session = next(c for c in cookies if c.startswith("flagproxy_session="))
        page = urllib.request.Request(f"{server}/console/projects", headers={"Cookie": session})
        with urllib.request.urlopen(page, timeout=10) as answer:
            assert b'<table id="projects">' in answer.read()  # the page itself, not the login it redirects to
        database = Path(_field(text, "database"))
        assert database.is_file()
        _check_samples(server, admin)

        show_any, show_alice, show_carol, turn_on = _curl_commands(text)
        # The first command has no context at all, and still shows a flag.
        assert "?" not in show_any and " -d " not in show_any  # (the key itself may hold "-d")
        assert [t["name"] for t in orjson.loads(_run_curl(show_any))["toggles"]] == ["welcome-banner"]
        # The status page, with the key in the part of the address that stays in the browser.
        status_page = _field(text, "status page")
        assert status_page == f"{proxy}/proxy/status#key={key}"
        with urllib.request.urlopen(status_page, timeout=10) as answer:
            assert answer.status == 200 and b"flagproxy status" in answer.read()
        status = _call(f"{proxy}/proxy/status.json", key)
        assert set(status["flags"]) == SAMPLE_FLAGS and status["ready"] is True
        alice = {t["name"]: t for t in orjson.loads(_run_curl(show_alice))["toggles"]}
        assert "beta-banner" in alice and "payments-kill-switch" not in alice
        assert alice["dark-mode"]["variant"]["enabled"] is True
        carol = orjson.loads(_run_curl(show_carol))
        assert "premium-search" in {t["name"] for t in carol["toggles"]}

        started = time.monotonic()
        headers, _, body = _run_curl(turn_on + " --include").replace(b"\r\n", b"\n").partition(b"\n\n")
        assert body == b"" and headers.startswith(b"HTTP/1.1 200"), headers
        # No body, so no Content-Type (Sanic wrote `content-type: None`).
        assert b"content-type" not in headers.lower(), headers
        propagation = wait_for_propagation(
            lambda: "payments-kill-switch" in {t["name"] for t in _call(f"{proxy}/proxy", key)["toggles"]},
            also_time=lambda: _call(f"{server}/api/admin/projects/default/features", admin),
            started=started,
        )
        propagation.assert_within_one_refresh(REFRESH_MS, "turning payments-kill-switch on")

        os.killpg(demo.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        assert demo.wait(timeout=60) == 0  # 0 only when the server and the proxy both stopped cleanly
    finally:
        if demo.poll() is None:
            # Ask it to stop its children first: they run in sessions of their own, so a SIGKILL of the
            # demo alone would leave them running.
            demo.terminate()
            try:
                demo.wait(timeout=45)
            except subprocess.TimeoutExpired:
                demo.kill()
                demo.wait(timeout=10)
        if demo.stdout is not None:
            demo.stdout.close()
    for port in (server_port, proxy_port):
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
    assert not database.exists() and not database.parent.exists()


def test_a_taken_port_stops_the_demo_before_it_sends_anything() -> None:
    # Another program on the server port (Unleash's own default, 4242) and on the proxy port: the demo names
    # both, says which flag picks another, exits 2, and sends that program nothing.
    with socket.socket() as server_taken, socket.socket() as proxy_taken:
        for taken in (server_taken, proxy_taken):
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            taken.settimeout(0)
        server_port, proxy_port = server_taken.getsockname()[1], proxy_taken.getsockname()[1]
        finished = subprocess.run(
            [sys.executable, "-m", "flagproxy", "demo", "--server-port", str(server_port),
             "--proxy-port", str(proxy_port)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        for taken in (server_taken, proxy_taken):
            with pytest.raises(BlockingIOError):
                taken.accept()  # nobody connected
    assert finished.returncode == 2, finished.stderr
    assert finished.stderr.splitlines() == [
        f"flagproxy demo: --server-port: cannot listen on 127.0.0.1:{server_port}: Address already in use "
        "(another program has it; --server-port chooses another port)",
        f"flagproxy demo: --proxy-port: cannot listen on 127.0.0.1:{proxy_port}: Address already in use "
        "(another program has it; --proxy-port chooses another port)",
    ]
    assert finished.stdout == ""


def test_the_demo_is_the_readmes_first_command() -> None:
    commands = [line.strip() for line in README.read_text().splitlines() if line.startswith("    ")]
    assert commands, "the README shows no command"
    assert commands[0].endswith("flagproxy demo"), commands[0]
