"""A config's timeline as SVG: the geometry of one row and one bar per attempt on one time axis, drawn by
the template templates/timeline.svg (autoescaped)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ...projections.attempt_queries import Attempt
from . import pages

WIDTH, LEFT, RIGHT, ROW, BAR, AXIS = 960, 84, 16, 22, 14, 28
MIN_BAR = 2.0  # px: an attempt of a few milliseconds stays visible
TICKS = 6
CHAR = 7.0  # px a character of the 11 px note takes at most (as wide as the widest of system-ui's lower case)
GAP = 6  # px between a note and what it must not touch (its bar, the row's label)


@dataclass(frozen=True)
class Note:
    """What a row says of its attempt, placed beside its bar: `shown` fits; `whole` is on hover when cut."""

    x: str
    anchor: str
    shown: str
    whole: str


@dataclass(frozen=True)
class Mark:
    x: str
    kind: str
    text: str
    moment: str


@dataclass(frozen=True)
class AttemptBar:
    a: Attempt
    label: str
    y: int
    x: str
    width: str
    tip: str
    note: Note
    marks: tuple[Mark, ...]


@dataclass(frozen=True)
class Tick:
    x: str
    anchor: str
    text: str


def svg(attempts: list[Attempt], now: datetime) -> str:
    """The timeline of `attempts` (claimed, in claim order); an open one runs until `now`.

    Each bar is a <rect class="attempt outcome-X"> with data-outcome, data-version, data-attempt,
    data-start, data-end (ISO times; data-end empty while open) and data-first, data-last (log
    positions), so that a reader, or a test, can check that no two overlap."""
    if not attempts:
        return pages.render("timeline.svg", rows=[])
    spans = [(_time(a.start), _time(a.end) if a.end else now) for a in attempts]
    begin = min(s for s, _ in spans)
    end = max(max(e for _, e in spans), begin)
    total = max((end - begin).total_seconds(), 1e-3)
    scale = (WIDTH - LEFT - RIGHT) / total
    height = AXIS + ROW * len(attempts) + 8
    rows = []
    for index, (a, (start, stop)) in enumerate(zip(attempts, spans, strict=True)):
        x = LEFT + (start - begin).total_seconds() * scale
        width = max((stop - start).total_seconds() * scale, MIN_BAR)
        label = f"v{a.revision}.{a.attempt}"
        ended = f"{a.end} ({a.outcome}{': ' + a.reason if a.reason else ''})" if a.end else "still running"
        tip = f"{label}: claimed {a.start} (position {a.first}), ended {ended}, {(stop - start).total_seconds():.3f} s"
        marks = tuple(
            Mark(f"{LEFT + (_time(moment) - begin).total_seconds() * scale:.2f}", kind, text, moment)
            for moment, kind, text in a.marks
        )
        y = AXIS + index * ROW
        rows.append(AttemptBar(a, label, y, f"{x:.2f}", f"{width:.2f}", tip, _note(a, x, width), marks))
    ticks = _axis(begin, total, scale)
    return pages.render(
        "timeline.svg", rows=rows, ticks=ticks, width=WIDTH, height=height, left=LEFT, bar=BAR, axis=AXIS
    )


def _note(a: Attempt, x: float, width: float) -> Note:
    """The outcome beside the bar: after it if it fits, else before it, else cut to the wider side (never
    over the row's label at the left, nor past the right edge)."""
    whole = a.outcome + (f": {a.reason}" if a.reason else "")
    if a.rolled_back_as is not None:
        whole += f" (rolled back as v{a.rolled_back_as})"
    after, before = x + width + GAP, x - GAP
    room_after, room_before = WIDTH - RIGHT - after, before - LEFT
    need = CHAR * len(whole)
    if need <= room_after or room_after >= room_before:
        return Note(f"{after:.2f}", "start", _cut(whole, room_after), whole)
    return Note(f"{before:.2f}", "end", _cut(whole, room_before), whole)


def _cut(text: str, room: float) -> str:
    fits = max(int(room // CHAR), 0)
    if len(text) <= fits:
        return text
    return text[: max(fits - 1, 0)] + "…" if fits > 1 else ""


def _axis(begin: datetime, total: float, scale: float) -> list[Tick]:
    """Ticks across the rows, each labelled with its UTC time (milliseconds when the span is short)."""
    ticks = []
    for i in range(TICKS + 1):
        seconds = total * i / TICKS
        moment = begin.timestamp() + seconds
        text = datetime.fromtimestamp(moment, begin.tzinfo).strftime("%H:%M:%S.%f")
        anchor = "start" if i == 0 else "end" if i == TICKS else "middle"
        ticks.append(Tick(f"{LEFT + seconds * scale:.2f}", anchor, text[:-3] if total < 60 else text[:8]))
    return ticks


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)
