"""Timestamps as the Unleash API writes them: ISO-8601, UTC, milliseconds, `Z`."""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    return to_iso(datetime.now(UTC))


def to_iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def hour_bucket(moment: datetime | None = None) -> str:
    """The start of the hour a usage count belongs to."""
    moment = (moment or datetime.now(UTC)).astimezone(UTC)
    return to_iso(moment.replace(minute=0, second=0, microsecond=0))
