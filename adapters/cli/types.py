"""Parameter types shared by commands: revisions and durations with sane bounds."""

from __future__ import annotations

import math

import click

SQLITE_MAX = 2**62  # versions and positions are SQLite integers: anything larger cannot exist


class Whole(click.IntRange):
    """A whole number in a range that help and errors state in words ("1 to 1000", "0 or more")."""

    name = "N"

    def __init__(self, minimum: int, maximum: int = SQLITE_MAX) -> None:
        super().__init__(min=minimum, max=maximum)

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, str) and not value.isascii():  # int() takes a full-width 5 for 5
            self.fail(f"{value!r} is not a whole number in ASCII digits", param, ctx)
        number: int = click.INT.convert(value, param, ctx)  # type: ignore[arg-type]  # click's int() takes any value
        if self.max == SQLITE_MAX and number > SQLITE_MAX:
            self.fail(f"{number} is too large to exist", param, ctx)
        if not self.min <= number <= self.max:  # type: ignore[operator]
            self.fail(f"{number} is out of range ({self._describe_range()})", param, ctx)
        return number

    def _describe_range(self) -> str:  # the help shows it; click's own reads [1<=x<=1000]
        return f"{self.min} or more" if self.max == SQLITE_MAX else f"{self.min} to {self.max}"


REVISION = Whole(1)
POSITION = Whole(0)
TIMEOUT = Whole(1, 86400)  # as the spec allows: a day
HISTORY_LIMIT = Whole(1, 1000)
MAX_SECONDS = 10**7  # about 115 days: longer is a typo, not a plan


class Seconds(click.ParamType):
    """A finite duration in seconds (click's FloatRange lets nan and inf through)."""

    name = "seconds"

    def __init__(self, minimum: float = 0.0) -> None:
        self.minimum = minimum

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, str) and not value.isascii():  # float() takes a full-width 5 for 5
            self.fail(f"{value!r} is not a number of seconds in ASCII digits", param, ctx)
        try:
            seconds = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or not self.minimum <= seconds <= MAX_SECONDS:
            self.fail(f"{value!r} is not between {self.minimum:g} and {MAX_SECONDS} seconds", param, ctx)
        return seconds


class Text(click.ParamType):
    """Free text kept in the log (a reason, a URL): at most `limit` characters, so one command cannot
    store megabytes that every read, export and page then carries for ever."""

    name = "text"

    def __init__(self, limit: int = 2048) -> None:
        self.limit = limit

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if len(text) > self.limit:
            self.fail(f"is {len(text)} characters long: at most {self.limit:,}", param, ctx)
        return text


TEXT = Text()
