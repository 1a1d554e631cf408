"""The load harness waits for the services to be idle before each measured run (benchmarks/load/runner.py),
so a process still busy from the run before does not take CPU from the next. Checked on real processes."""

from __future__ import annotations

import subprocess
import sys
import time

from benchmarks.load.processes import group_cpu_seconds, wait_until_quiet

SPIN = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end: pass"


def _spinner(seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", SPIN, str(seconds)], start_new_session=True)


def test_a_busy_group_is_waited_for_until_it_is_idle() -> None:
    busy = _spinner(2.5)
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        time.sleep(0.3)
        assert wait_until_quiet([busy.pid, idle.pid], window=0.5, timeout=1.0) is None  # still spinning
        assert group_cpu_seconds(busy.pid) > 0.5
        waited = wait_until_quiet([busy.pid, idle.pid], window=0.5, timeout=10.0)
        assert waited is not None and busy.poll() is not None  # quiet once the spinner is done
        assert wait_until_quiet([idle.pid], window=0.5, timeout=1.0) is not None
    finally:
        for process in (busy, idle):
            process.kill()
            process.wait()
