"""How long and how hard the campaign runs: the short form (CI, a few minutes) or `--long`
(FLAGPROXY_CAMPAIGN=long, the hour-long soak and a metrics outage of minutes)."""

from __future__ import annotations

import os

LONG = os.environ.get("FLAGPROXY_CAMPAIGN", "short") == "long"


def pick(short: float, long: float) -> float:
    return long if LONG else short


SOAK_SECONDS = pick(60, 3600)
SOAK_WARMUP_SECONDS = pick(15, 300)
PAYLOAD_CHANGE_SECONDS = pick(2, 5)
METRICS_OUTAGE_SECONDS = pick(8, 180)
SERVER_FUZZ_EXAMPLES = int(pick(150, 2000))
COMPILER_FUZZ_EXAMPLES = int(pick(150, 2000))
