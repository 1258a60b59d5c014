"""Times as the log writes them: ISO text in UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_text(value: str) -> str:
    """An ISO time as UTC text (without an offset it is UTC); ValueError unless it is one that UTC can hold
    (9999-12-31T23:59:59-14:00 is past the last day Python's datetime knows)."""
    moment = datetime.fromisoformat(value)
    try:
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
    except OverflowError:
        raise ValueError(f"{value!r} is out of range in UTC") from None
