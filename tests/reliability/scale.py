"""How long and how hard the campaign runs: the short form (CI, a few minutes) or `--long`
(FLAGPROXY_CAMPAIGN=long, the hour-long soak and a metrics outage of minutes)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

LONG = os.environ.get("FLAGPROXY_CAMPAIGN", "short") == "long"


def pick(short: float, long: float) -> float:
    return long if LONG else short


SOAK_SECONDS = pick(60, 3600)
SOAK_WARMUP_SECONDS = pick(15, 300)
PAYLOAD_CHANGE_SECONDS = pick(2, 5)
METRICS_OUTAGE_SECONDS = pick(8, 180)
SERVER_FUZZ_EXAMPLES = int(pick(150, 2000))
COMPILER_FUZZ_EXAMPLES = int(pick(150, 2000))


def fuzz_settings(examples: int) -> settings:
    """The campaign's hypothesis settings: `examples` inputs, the same ones every run (derandomized, no
    example database), no deadline or health check (real processes on loopback are slow, not broken)."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
