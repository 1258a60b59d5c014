"""Parameter types shared by commands: revisions and durations with sane bounds."""

from __future__ import annotations

import math

import click

# Versions are SQLite integers: anything larger cannot exist.
REVISION = click.IntRange(min=1, max=2**62)
MAX_SECONDS = 10**7  # about 115 days: longer is a typo, not a plan


class Seconds(click.ParamType):
    """A finite duration in seconds (click's FloatRange lets nan and inf through)."""

    name = "seconds"

    def __init__(self, minimum: float = 0.0) -> None:
        self.minimum = minimum

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            seconds = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or not self.minimum <= seconds <= MAX_SECONDS:
            self.fail(f"{value!r} is not between {self.minimum:g} and {MAX_SECONDS} seconds", param, ctx)
        return seconds
