"""A config's timeline as server-rendered SVG: one row and one bar per attempt, on one time axis."""

from __future__ import annotations

from datetime import datetime
from html import escape

from ...projections.attempt_queries import Attempt

WIDTH, LEFT, RIGHT, ROW, BAR, AXIS = 960, 84, 16, 22, 14, 28
MIN_BAR = 2.0  # px: an attempt of a few milliseconds stays visible
TICKS = 6


def svg(attempts: list[Attempt], now: datetime) -> str:
    """The timeline of `attempts` (claimed, in claim order); an open one runs until `now`.

    Each bar is a <rect class="attempt outcome-X"> with data-outcome, data-version, data-attempt,
    data-start, data-end (ISO times; data-end empty while open) and data-first, data-last (log
    positions), so that a reader, or a test, can check that no two overlap."""
    if not attempts:
        return '<p class="empty">No attempt has been claimed yet.</p>'
    spans = [(_time(a.start), _time(a.end) if a.end else now) for a in attempts]
    begin = min(s for s, _ in spans)
    end = max(max(e for _, e in spans), begin)
    total = max((end - begin).total_seconds(), 1e-3)
    scale = (WIDTH - LEFT - RIGHT) / total
    height = AXIS + ROW * len(attempts) + 8
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{WIDTH}" height="{height}"'
        f' viewBox="0 0 {WIDTH} {height}" role="img" aria-label="attempts over time">'
    ]
    parts += _axis(begin, total, scale, height)
    for row, (a, (start, stop)) in enumerate(zip(attempts, spans, strict=True)):
        x = LEFT + (start - begin).total_seconds() * scale
        width = max((stop - start).total_seconds() * scale, MIN_BAR)
        y = AXIS + row * ROW
        label = f"v{a.revision}.{a.attempt}"
        ended = f"{a.end} ({a.outcome}{': ' + a.reason if a.reason else ''})" if a.end else "still running"
        tip = f"{label}: claimed {a.start} (position {a.first}), ended {ended}, {(stop - start).total_seconds():.3f} s"
        parts.append(f'<text class="label" x="{LEFT - 6}" y="{y + BAR - 3}" text-anchor="end">{escape(label)}</text>')
        parts.append(
            f'<rect class="attempt outcome-{escape(a.outcome)}" x="{x:.2f}" y="{y}" width="{width:.2f}" height="{BAR}"'
            f' rx="2" data-outcome="{escape(a.outcome)}" data-version="{a.revision}" data-attempt="{a.attempt}"'
            f' data-start="{escape(a.start)}" data-end="{escape(a.end or "")}"'
            f' data-first="{a.first}" data-last="{a.last}"'
            + (f' data-rollback="{a.rolled_back_as}"' if a.rolled_back_as is not None else "")
            + f"><title>{escape(tip)}</title></rect>"
        )
        for moment, kind, text in a.marks:
            mx = LEFT + (_time(moment) - begin).total_seconds() * scale
            parts.append(
                f'<line class="mark mark-{escape(kind)}" x1="{mx:.2f}" y1="{y + 1}" x2="{mx:.2f}" y2="{y + BAR - 1}"'
                f' data-kind="{escape(kind)}"><title>{escape(text)} at {escape(moment)}</title></line>'
            )
        note = a.outcome + (f": {a.reason}" if a.reason else "")
        if a.rolled_back_as is not None:
            note += f" (rolled back as v{a.rolled_back_as})"
        after = x + width + 6
        if after + 7 * len(note) < WIDTH:
            parts.append(f'<text class="note" x="{after:.2f}" y="{y + BAR - 3}">{escape(note)}</text>')
        else:
            parts.append(
                f'<text class="note" x="{x - 6:.2f}" y="{y + BAR - 3}" text-anchor="end">{escape(note)}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts)


def _axis(begin: datetime, total: float, scale: float, height: int) -> list[str]:
    """Tick lines across the rows, each labelled with its UTC time (milliseconds when the span is short)."""
    parts = []
    for i in range(TICKS + 1):
        seconds = total * i / TICKS
        x = LEFT + seconds * scale
        moment = begin.timestamp() + seconds
        text = datetime.fromtimestamp(moment, begin.tzinfo).strftime("%H:%M:%S.%f")
        text = text[:-3] if total < 60 else text[:8]
        parts.append(f'<line class="tick" x1="{x:.2f}" y1="{AXIS - 6}" x2="{x:.2f}" y2="{height - 4}"/>')
        anchor = "start" if i == 0 else "end" if i == TICKS else "middle"
        parts.append(f'<text class="tick" x="{x:.2f}" y="{AXIS - 10}" text-anchor="{anchor}">{text}</text>')
    return parts


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)
