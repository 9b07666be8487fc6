"""UTC timestamps as the ISO-8601 strings stored in documents."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> str:
    """Current UTC time as ``"2025-01-31T12:00:00.123Z"``. Cost O(1)."""
    return to_iso(datetime.now(UTC).timestamp())


def to_iso(epoch_seconds: float) -> str:
    """A POSIX timestamp (seconds) as an ISO-8601 UTC string with milliseconds. Cost O(1)."""
    moment = datetime.fromtimestamp(epoch_seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def seconds_since(iso: str | None, now: float | None = None) -> float:
    """Seconds from the ISO-8601 time ``iso`` (as `to_iso` writes it) to ``now`` (POSIX seconds, default
    the current time); infinity for None or a string that is not such a time. Cost O(1)."""
    if iso is None:
        return float("inf")
    try:
        then = datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except (AttributeError, TypeError, ValueError):
        return float("inf")
    return (datetime.now(UTC).timestamp() if now is None else now) - then
