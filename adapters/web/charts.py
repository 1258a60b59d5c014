"""An attempt's analysis as SVG (DESIGN 7.9): one small chart per template of its measurements' values, step by
step, with the template's conditions beside it; the geometry here, drawn by templates/charts.svg (autoescaped)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import pages

WIDTH, HEIGHT = 760, 146
LEFT, PLOT = 80, 400  # the plot runs from LEFT to LEFT + PLOT; the value labels sit left of it
TOP, BOTTOM = 28, 118  # the plot's top and its axis, where a point with no numeric value sits
PAD = 10  # px between the plot's edges and the highest and lowest value
SIDE = LEFT + PLOT + 24  # where the conditions are written
LINE = 15  # px from one line of the conditions to the next
LINES = 7  # lines of conditions at most (what fits beside the plot)
CHAR = 7.0  # px a character of the 11 px text takes at most (as in timeline.py)
STEP_LABEL = 52.0  # px a step's group is given at least, while the steps fit: room for "step 99"


@dataclass(frozen=True)
class ChartPoint:
    x: str
    y: str
    k: int
    step: int
    outcome: str
    value: str  # the value as JSON ("" when none)
    numeric: bool
    tip: str


@dataclass(frozen=True)
class StepGroup:
    x: str  # where its group begins (a boundary is drawn there but for the first)
    middle: str
    label: str
    tip: str


@dataclass(frozen=True)
class ChartLabel:
    x: str
    y: str
    text: str
    whole: str  # on hover when `text` is cut


@dataclass(frozen=True)
class Chart:
    template: str
    title: ChartLabel
    points: tuple[ChartPoint, ...]
    steps: tuple[StepGroup, ...]
    values: tuple[ChartLabel, ...]  # the value labels at the left (the highest and the lowest)
    conditions: tuple[ChartLabel, ...]


def svg(measurements: Sequence[Mapping[str, Any]], templates: Mapping[str, Mapping[str, Any]]) -> str:
    """A chart per template that measured (in the order they first did), of `measurements` (one attempt's, in
    order: history JSON's `verification.measurements`); `templates` is template_queries.templates' fold,
    where each `NAME@REVISION` finds its spec. --verify's measurements (no template) have no value to draw."""
    by_template: dict[str, list[Mapping[str, Any]]] = {}
    for m in measurements:
        if m.get("template") is not None:
            by_template.setdefault(str(m["template"]), []).append(m)
    charts = [_chart(template, found, _spec(template, templates)) for template, found in by_template.items()]
    return pages.render(
        "charts.svg", charts=charts, width=WIDTH, height=HEIGHT, left=LEFT, plot=PLOT, top=TOP, bottom=BOTTOM
    )


def _spec(template: str, templates: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    name, _, revision = template.rpartition("@")
    found = templates.get(name)
    if found is None or not revision.isdigit():
        return None
    spec: Mapping[str, Any] | None = found["revisions"].get(int(revision))
    return spec


def _chart(template: str, measurements: list[Mapping[str, Any]], spec: Mapping[str, Any] | None) -> Chart:
    numbers = [v for v in (_number(m.get("value")) for m in measurements) if v is not None]
    low, high = (min(numbers), max(numbers)) if numbers else (0.0, 0.0)
    groups: dict[int, list[Mapping[str, Any]]] = {}
    for m in measurements:
        groups.setdefault(int(m["step"]), []).append(m)
    widths = _widths([len(g) for g in groups.values()])
    points, steps, x = [], [], float(LEFT)
    for (step, group), width in zip(groups.items(), widths, strict=True):
        label = _fit(f"step {step}", width - 4) or _fit(str(step), width - 4)
        steps.append(StepGroup(f"{x:.2f}", f"{x + width / 2:.2f}", label, f"step {step}: {len(group)} measured"))
        for i, m in enumerate(group):
            points.append(_point(m, x + (i + 0.5) * width / len(group), low, high))
        x += width
    values: tuple[ChartLabel, ...] = ()
    if numbers:
        shown = {_y(high, low, high): high, _y(low, low, high): low}  # one label when every value is the same
        values = tuple(ChartLabel(f"{LEFT - 6}", f"{y + 4:.2f}", *_cut(_text(v), LEFT - 10)) for y, v in shown.items())
    provider = spec.get("provider", "?") if spec is not None else "?"
    title = f"{template} · {provider} · {len(measurements)} measured"
    return Chart(
        template,
        ChartLabel("8", "16", *_cut(title, WIDTH - 16)),
        tuple(points),
        tuple(steps),
        values,
        _conditions(spec),
    )


def _widths(counts: list[int]) -> list[float]:
    """Each step's share of the plot: a floor that holds its label (while the steps fit), the rest by count."""
    floor = min(STEP_LABEL, PLOT / len(counts))
    rest = PLOT - floor * len(counts)
    return [floor + rest * n / sum(counts) for n in counts]


def _point(m: Mapping[str, Any], x: float, low: float, high: float) -> ChartPoint:
    value = m.get("value")
    number = _number(value)
    shown = "none" if value is None else json.dumps(value)
    tip = f"#{m['k']} · step {m['step']} · {m['outcome']} · value {shown}"
    if m.get("error"):
        tip += f" · {m['error']}"
    y = BOTTOM if number is None else _y(number, low, high)
    text = "" if value is None else json.dumps(value)
    return ChartPoint(
        f"{x:.2f}", f"{y:.2f}", int(m["k"]), int(m["step"]), str(m["outcome"]), text, number is not None, tip
    )


def _y(value: float, low: float, high: float) -> float:
    """Where `value` sits: the range of the values spans the plot inside PAD (one value alone: the middle)."""
    if high == low:
        return (TOP + BOTTOM) / 2
    return BOTTOM - PAD - (value - low) / (high - low) * (BOTTOM - TOP - 2 * PAD)


def _number(value: object) -> float | None:
    """A value that is one finite number (not a list, a text, NaN written as text, or true/false)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _text(value: float) -> str:
    return f"{value:.4g}"


def _conditions(spec: Mapping[str, Any] | None) -> tuple[ChartLabel, ...]:
    """The template's rules as its options say them, wrapped to the room beside the plot."""
    if spec is None:
        said = [("", "this revision of the template is not in the log")]
    else:
        said = [(f"{key}: ", str(spec[key])) for key in ("success", "failure") if spec.get(key)]
        if not said:
            said = [("", _default_rule(str(spec.get("provider"))))]
        said.append(("on empty: ", str(spec.get("on_empty") or "inconclusive")))
    room = WIDTH - SIDE - 8
    lines: list[ChartLabel] = []
    for n, (prefix, rule) in enumerate(said):
        rows = LINES - len(lines) - (len(said) - n - 1)  # each rule after this one keeps a line
        for i, (text, whole) in enumerate(_wrap(prefix + rule, room, rows)):
            lines.append(ChartLabel(f"{SIDE + (12 if i else 0)}", f"{TOP + 6 + LINE * len(lines)}", text, whole))
    return tuple(lines)


def _default_rule(provider: str) -> str:
    """What decides when the template gives no --success nor --failure (7.9)."""
    return {
        "http": "no condition: passed on any 2xx",
        "command": "no condition: exit 0 passed, 1 failed, else inconclusive",
    }.get(provider, "no condition: failed unless empty")


def _wrap(text: str, room: float, rows: int) -> list[tuple[str, str]]:
    """`text` in lines of at most `room` px (a continued line is indented 12 px), `rows` at most; the last one
    cut (then each line says the whole on hover)."""
    lines: list[str] = []
    words = text.split(" ")
    while words:
        fits = int((room - (12 if lines else 0)) // CHAR)
        line = words.pop(0)
        while words and len(line) + 1 + len(words[0]) <= fits:
            line += " " + words.pop(0)
        if len(line) > fits:  # one word longer than a line: cut it there, go on with the rest
            words.insert(0, line[fits:])
            line = line[:fits]
        lines.append(line)
    cut = len(lines) > rows
    if cut:
        lines = lines[:rows]
        fits = int((room - 12) // CHAR)
        lines[-1] = lines[-1][: max(fits - 1, 0)] + "…"
    return [(line, text if cut else line) for line in lines]


def _cut(text: str, room: float) -> tuple[str, str]:
    """`text` as it fits in `room` px (cut, with an ellipsis) and whole."""
    fits = max(int(room // CHAR), 0)
    if len(text) <= fits:
        return text, text
    return (text[: max(fits - 1, 0)] + "…" if fits > 1 else ""), text


def _fit(text: str, room: float) -> str:
    return text if CHAR * len(text) <= room else ""
