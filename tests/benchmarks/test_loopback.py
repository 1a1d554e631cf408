"""`--loopback-cc` (benchmarks/load/loopback.py): a load run in a network namespace of its own whose loopback
uses the congestion control asked for, with the machine's own setting left alone. Checked in child
processes (the namespace is the process's for good); CI runs as root, which unshare needs."""

from __future__ import annotations

import subprocess
import sys

from benchmarks.load import loopback

CHILD = """
import socket, sys
from benchmarks.load import loopback
try:
    loopback.private_loopback(sys.argv[1])
except loopback.LoopbackError as error:
    print("error:", error)
    sys.exit(3)
with socket.socket() as server, socket.socket() as client:  # the new loopback carries a connection
    server.bind(("127.0.0.1", 0))
    server.listen()
    client.connect(server.getsockname())
    accepted, _ = server.accept()
    client.sendall(b"ping")
    assert accepted.recv(4) == b"ping"
    accepted.close()
print(loopback.congestion_control())
"""


def _child(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHILD, name], capture_output=True, text=True, timeout=30)


def test_a_private_loopback_uses_the_congestion_control_asked_for() -> None:
    machine = loopback.congestion_control()
    done = _child("reno")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "reno"
    assert loopback.congestion_control() == machine  # the machine's own is untouched


def test_a_congestion_control_the_kernel_does_not_have_is_a_clear_error() -> None:
    done = _child("no-such-cc")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "congestion control 'no-such-cc' cannot be set" in done.stdout
    assert "reno always is" in done.stdout


def test_bbr_is_known_to_pace_and_reno_and_cubic_are_not() -> None:
    assert loopback.paces_loopback("bbr") and loopback.paces_loopback("bbr2")
    assert not any(loopback.paces_loopback(name) for name in ("reno", "cubic", None))
