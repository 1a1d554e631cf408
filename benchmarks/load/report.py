"""The results of a load run: rows, the markdown tables printed at the end, and the JSON document."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Row:
    """One (flag count, scenario, target) measurement."""

    flags: int
    scenario: str
    target: str
    requests_per_s: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    errors: int = 0  # socket errors + timeouts + responses whose status was not the expected one
    error_detail: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    response_bytes: int | None = None  # the typical answer's body, as probed
    ratio_to_baseline: float | None = None
    # CPU time the target's process group used per request in the measured run: less swayed than req/s
    # by other work on a shared machine, so small costs (the Prometheus series) still show.
    cpu_us_per_request: float | None = None
    # --prometheus-off's paired rows: this row's req/s over its partner's, in alternating rounds.
    paired_ratio: float | None = None
    paired_median: float | None = None  # the first row of a pair: the median of the rounds' ratios
    note: str | None = None


@dataclass
class FlagRun:
    flags: int
    rows: list[Row] = field(default_factory=list)
    rss_mib: dict[str, dict[str, Any]] = field(default_factory=dict)  # target → {"main", "workers"}
    stopped_cleanly: dict[str, bool | None] = field(default_factory=dict)  # service → SIGTERM sufficed


def failed(runs: list[FlagRun]) -> bool:
    return any(row.errors for run in runs for row in run.rows)


def markdown(runs: list[FlagRun]) -> str:
    lines = [
        "| flags | scenario | target | req/s | p50 ms | p99 ms | errors | vs baseline | CPU µs/req |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        for row in run.rows:
            ratio = f"{row.ratio_to_baseline:.2f}x" if row.ratio_to_baseline is not None else "-"
            if row.paired_ratio is not None:
                ratio = f"{row.paired_ratio:.3f}x of the pair"
            cpu = f"{row.cpu_us_per_request:.0f}" if row.cpu_us_per_request is not None else "-"
            lines.append(
                f"| {row.flags} | {row.scenario} | {row.target} | {row.requests_per_s:,.0f} "
                f"| {_ms(row.p50_ms)} | {_ms(row.p99_ms)} | {row.errors} | {ratio} | {cpu} |"
            )
    lines += ["", "| flags | target | RSS per worker MiB | main process MiB |", "|---:|---|---|---:|"]
    for run in runs:
        for target, rss in run.rss_mib.items():
            workers = ", ".join(f"{w:.1f}" for w in rss.get("workers", [])) or "-"
            main = f"{rss['main']:.1f}" if rss.get("main") is not None else "-"
            lines.append(f"| {run.flags} | {target} | {workers} | {main} |")
    return "\n".join(lines)


def problems(runs: list[FlagRun]) -> list[str]:
    """One line per row with errors, and per service that needed SIGKILL to stop."""
    out = []
    for run in runs:
        for row in run.rows:
            if row.errors:
                detail = ", ".join(f"{k} {v}" for k, v in row.error_detail.items() if v)
                out.append(f"{row.flags} flags, {row.scenario}, {row.target}: {row.errors} errors ({detail})"
                           + (f": {row.note}" if row.note else ""))  # fmt: skip
        for service, clean in run.stopped_cleanly.items():
            if clean is False:
                out.append(f"{run.flags} flags: {service} did not exit on SIGTERM (killed)")
    return out


def write_json(path: Path, meta: dict[str, Any], runs: list[FlagRun], memory: list[Any] = ()) -> None:
    document = {
        **meta,
        "ok": not failed(runs),
        "runs": [asdict(run) for run in runs],
        "instance_memory": [{**asdict(row), "total_mib": row.total_mib} for row in memory],
    }
    path.write_text(json.dumps(document, indent=2) + "\n")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
