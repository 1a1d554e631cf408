"""The loopback a load run measures over: which TCP congestion control it uses, and a private one.

A load run's client and servers talk over 127.0.0.1, whose MTU is 64 KiB, so a 250 kB answer is four or
five segments. With BBR as the kernel's congestion control (some kernels' default), the sender paces each
connection at a rate estimated from how fast the receiver acknowledged the last answers, and a client
that reads late (a Python client busy with another connection's answer) drives that estimate of a
connection down to a few MB/s: its next answers leave the server in 0.3 ms and arrive 20-70 ms later, the
rest of the answer held back by the pacer, not by the server (benchmarks/README.md, issue 25's p99 runs:
seen with tcpdump, and `ss -tin` showing a pacing rate of 2.5 MB/s on a loopback connection). That
measures the client and the kernel's bandwidth estimate, not the server, and falls unevenly on the
targets. Reno and CUBIC do not pace: over loopback they send whatever the receive window allows.

`private_loopback(name)` moves this process, and so every service it starts afterwards, into a network
namespace of its own whose loopback uses congestion control `name` (reno is allowed in any namespace;
others only when the machine's net.ipv4.tcp_allowed_congestion_control lists them). It needs root
(CAP_SYS_ADMIN for unshare, CAP_NET_ADMIN for the loopback) and iproute2's `ip`; the machine's own
settings are not changed, and the namespace ends with the process.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

_SETTING = Path("/proc/sys/net/ipv4/tcp_congestion_control")
_CLONE_NEWNET = 0x40000000


class LoopbackError(RuntimeError):
    """A private loopback could not be made; the message says why and what to do."""


def congestion_control() -> str | None:
    """The congestion control new TCP connections of this process's network namespace get."""
    try:
        return _SETTING.read_text().strip() or None
    except OSError:
        return None


def paces_loopback(name: str | None) -> bool:
    """Whether `name` paces each connection by an estimate of its bandwidth (BBR does)."""
    return name is not None and name.startswith("bbr")


def private_loopback(name: str) -> None:
    """This process into a new network namespace with its loopback up and using `name`. Call it before any
    thread or child process is started (unshare moves only the calling thread)."""
    ip = shutil.which("ip")
    if ip is None:
        raise LoopbackError("a private loopback needs iproute2's `ip` (apt-get install iproute2)")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        raise LoopbackError(
            f"unshare(CLONE_NEWNET) failed: {os.strerror(error)} (a private loopback needs root)"
        )
    up = subprocess.run([ip, "link", "set", "lo", "up"], capture_output=True, text=True)
    if up.returncode != 0:
        raise LoopbackError(f"`ip link set lo up` in the new namespace failed: {up.stderr.strip()}")
    try:
        _SETTING.write_text(name)
    except OSError as error:
        allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
        listed = allowed.read_text().strip() if allowed.exists() else "?"
        raise LoopbackError(
            f"congestion control {name!r} cannot be set in a network namespace ({error.strerror}); "
            f"allowed there: {listed} (reno always is)"
        ) from None
