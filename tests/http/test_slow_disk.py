"""A slow disk never stalls answers: a real `flagproxy proxy --workers 1` (its sync on the serving loop)
whose file writes each take a second, as ext4's journal makes a rename or an `utime` wait beside an
`npm ci`, still answers toggle requests at once, and what it wrote meanwhile arrives afterwards: the
upstream's check time and status, the request series, the usage hand-offs and a new published document
(flagproxy/disk.py: the periodic writes of a serving process go to its writer thread). Scrapes meanwhile
wait for their own flush without holding the others' answers.

The fault is injected where we do not own the code: a `sitecustomize.py` on the child's PYTHONPATH wraps
`os.replace`, `os.utime` and prometheus_client's `MmapedDict.write_value` with a one-second sleep while a
marker file exists (each kind at most once a second, so one kind cannot hold a writer for the whole
window), and logs each slowed call with its thread."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from tests.http.loopback import KEY, fetch
from tests.http.test_prometheus import requests_of

SLOW_SECONDS = 1.0
SITECUSTOMIZE = """
import os, threading, time

_MARKER = os.environ["SLOW_DISK_MARKER"]
_LOG = os.environ["SLOW_DISK_LOG"]
_SECONDS = float(os.environ["SLOW_DISK_SECONDS"])
_CLEAR = {}  # each kind of call stalls at most once a second: a journal that stalls now and then


def _slowly(name, call):
    def slowed(*args, **kwargs):
        if os.path.exists(_MARKER) and time.monotonic() >= _CLEAR.get(name, 0.0):
            with open(_LOG, "a") as log:
                log.write(f"{os.getpid()} {name} {threading.current_thread().name}\\n")
            time.sleep(_SECONDS)
            _CLEAR[name] = time.monotonic() + _SECONDS
        return call(*args, **kwargs)

    return slowed


os.replace = _slowly("replace", os.replace)
os.utime = _slowly("utime", os.utime)
from prometheus_client import mmap_dict

mmap_dict.MmapedDict.write_value = _slowly("write_value", mmap_dict.MmapedDict.write_value)
"""

NAMED = {"toggles": ["default-on", "no-strategies"], "context": {"userId": "u1"}}


def slow_disk_env(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    folder = tmp_path / "slow-disk"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    marker, log = tmp_path / "disk-is-slow", tmp_path / "slowed.log"
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p)
    env = {"PYTHONPATH": path, "SLOW_DISK_MARKER": str(marker), "SLOW_DISK_LOG": str(log)}
    env["SLOW_DISK_SECONDS"] = str(SLOW_SECONDS)
    return env, marker, log


def timed_post(port: int) -> float:
    """One POST /proxy with named toggles; its seconds (one that got no answer in 5 s counts as 5)."""
    started = time.monotonic()
    headers = {"Authorization": KEY, "Content-Type": "application/json"}
    try:
        status, _, body = fetch(port, "POST", "/proxy", headers, json.dumps(NAMED), timeout=5)
    except TimeoutError:
        return time.monotonic() - started
    assert status == 200, body
    return time.monotonic() - started


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def usage_of(upstream: Any, name: str) -> int:
    """Yes and no of `name` over every metrics POST the upstream received."""
    counts = [
        post["body"]["bucket"]["toggles"].get(name, {}) for post in upstream.received("/api/client/metrics")
    ]
    return sum(count.get("yes", 0) + count.get("no", 0) for count in counts)


def test_answers_go_on_while_every_file_write_takes_a_second(proxy_factory, upstream, tmp_path):
    env, marker, log = slow_disk_env(tmp_path)
    proxy = proxy_factory(env=env, refresh_interval=100, metrics_interval=1000, enable_prometheus=True)
    assert proxy.toggles()  # ready, on a quick disk

    marker.touch()  # from now on every rename, utime and series write takes a second
    sent, latencies = 0, []
    window_end = time.monotonic() + 5 * SLOW_SECONDS
    scrapes: list[int] = []

    def scrape_meanwhile() -> None:  # a scrape waits for its own flush; the others' answers do not
        while time.monotonic() < window_end:
            scrapes.append(fetch(proxy.port, "GET", "/proxy/internal-backstage/prometheus", timeout=10)[0])

    scraping = threading.Thread(target=scrape_meanwhile)
    scraping.start()
    changed = False
    while time.monotonic() < window_end:
        latencies.append(timed_post(proxy.port))
        sent += 1
        if not changed and time.monotonic() > window_end - 2 * SLOW_SECONDS:
            # A change published while the disk is slow: written whole, then renamed, a second later.
            upstream.payload = json.loads(json.dumps(upstream.payload))
            upstream.payload["features"][0]["enabled"] = False
            changed = True
        time.sleep(0.02)
    scraping.join(15)
    marker.unlink()
    quick_again = time.time()
    assert scrapes and set(scrapes) == {200}, scrapes

    slowed = log.read_text().split()
    pid = str(proxy.popen.pid)
    for call in ("utime", "replace", "write_value"):  # the fault was met, in the serving process
        assert f"{pid} {call}" in log.read_text(), (call, slowed[:20])
    worst = max(latencies)
    assert worst < SLOW_SECONDS / 3, f"an answer waited {worst:.3f} s on the disk ({sorted(latencies)[-5:]})"

    # Nothing was lost: what was written slowly arrives, in order.
    def served_enabled() -> bool:
        toggles = {t["name"] for t in proxy.toggles()}
        return "default-on" not in toggles

    wait_until(served_enabled, 15, "the document published on the slow disk never arrived")
    wait_until(lambda: requests_of(proxy.port, "toggles_post") >= sent, 15, "requests were not counted")
    wait_until(
        lambda: usage_of(upstream, "no-strategies") >= sent,
        15,
        "the usage hand-offs never reached the upstream",
    )

    def status() -> dict[str, Any]:
        return json.loads(proxy.get("/proxy/status.json", key=KEY)[2])

    wait_until(lambda: (status()["last_success"] or 0) >= quick_again, 15, "the status stayed behind")

    os.kill(proxy.popen.pid, signal.SIGTERM)
    proxy.popen.wait(30)
    assert proxy.popen.returncode == 0, proxy.stop()
