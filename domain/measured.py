"""How a measurement's answer becomes an outcome (DESIGN 7.9): plain functions, no validation library, so the
measurement process that runs a built-in provider decides its own outcome at the cost of a few imports."""

from __future__ import annotations

import json
import math
from typing import Literal, NamedTuple

from . import condition
from .condition import EvaluationError, Value

Outcome = Literal["passed", "failed", "inconclusive"]
MOST_SHOWN = 256  # characters of a value or an error that an event keeps


class Measured(NamedTuple):
    """What a template's measurement process said of itself: its value (as an event keeps it) and why it was
    inconclusive (None when it was not, or said nothing)."""

    value: Value
    error: str | None


def outcome(
    success: str | None,
    failure: str | None,
    on_empty: Outcome,
    result: Value,
    *,
    empty: bool,
    error: str | None,
) -> tuple[Outcome, str | None]:
    """A measurement's outcome and why it is inconclusive. An error is inconclusive; an empty result follows
    `on_empty`; then `success` holding is passed, else `failure` holding is failed, neither inconclusive, and
    without `failure` failed. Without `success` any answer passes unless `failure` holds. A result the
    conditions cannot decide (NaN, a list where a number was meant) is inconclusive, with why."""
    if error is not None:
        return "inconclusive", shortened(error)
    if empty:
        return on_empty, None if on_empty != "inconclusive" else "empty result"
    if isinstance(result, float) and math.isnan(result):
        return "inconclusive", "the result is NaN"
    try:
        if success is not None and condition.decide(success, result):
            return "passed", None
        failed = failure is not None and condition.decide(failure, result)
    except EvaluationError as why:
        return "inconclusive", shortened(str(why))
    if success is None:  # any answer passes (an http 2xx), unless the failure condition holds
        return ("failed", None) if failed else ("passed", None)
    return ("failed", None) if failed or failure is None else ("inconclusive", None)


def shortened(text: str) -> str:
    """At most MOST_SHOWN printable characters (an event keeps no more, and nothing that moves a terminal)."""
    clean = "".join(c if c.isprintable() else " " for c in text)
    return clean if len(clean) <= MOST_SHOWN else clean[: MOST_SHOWN - 1] + "\u2026"


def shown_value(value: Value) -> Value:
    """A result as an event keeps it: a number, a list of numbers, or text of at most MOST_SHOWN printable
    characters (None when there is none)."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        return value[:MOST_SHOWN]
    return shortened(value if isinstance(value, str) else str(value))


def said(last_line: str) -> Measured | None:
    """What a template's measurement process said of itself, from its output's last line (a JSON document with
    `value` and `error`); None when that line is not one (the process died first, or was not ours)."""
    try:
        document = json.loads(last_line)
    except ValueError:
        return None
    if not isinstance(document, dict) or "outcome" not in document:
        return None
    error = document.get("error")
    return Measured(shown_value(document.get("value")), None if error is None else shortened(str(error)))
