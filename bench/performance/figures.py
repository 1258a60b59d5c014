"""A bench run's results: a figure beside its baseline, its goal, and the table and JSON bench/run.py prints."""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass
from typing import Any


def median(values: list[float]) -> float:
    return statistics.median(values)


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass
class Figure:
    name: str
    label: str
    unit: str
    value: float
    baseline: float | None
    goal: str  # ">=0.6x", "<=1.2x" (ratio to the baseline), "<=100" or ">=25" (the value itself)
    note: str = ""
    noise: float = 0.0  # a ratio goal also holds this much short of its limit (the baseline's own spread)
    skipped: str = ""  # why it was not measured (then never ok)

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0):
            return None
        return self.value / self.baseline  # type: ignore[operator]

    @property
    def ok(self) -> bool:
        if self.skipped:
            return False
        op, target = self.goal[:2], self.goal[2:]
        against = self.ratio if target.endswith("x") else self.value
        if against is None:
            return False
        limit = float(target.rstrip("x"))
        return against >= limit - self.noise if op == ">=" else against <= limit + self.noise

    def as_json(self) -> dict[str, Any]:
        ratio = self.ratio
        if self.skipped:
            goal = self.goal if self.goal.endswith("x") else f"{self.goal} {self.unit}"
            return {"value": None, "baseline": None, "ratio": None, "goal": goal, "ok": False, "skipped": self.skipped}
        return {
            "value": round(self.value, 4),
            "baseline": None if self.baseline is None else round(self.baseline, 4),
            "ratio": None if ratio is None else round(ratio, 3),
            "goal": self.goal if self.goal.endswith("x") else f"{self.goal} {self.unit}",
            "ok": self.ok,
        }


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "null"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{text} {unit}".strip()


def print_table(figures: list[Figure], mode: str, elapsed: float) -> None:
    rows = [("figure", "value", "baseline", "ratio", "goal", "ok")]
    for f in figures:
        goal = f.goal if f.goal.endswith("x") else f"{f.goal} {f.unit}"
        ratio = f.ratio
        if f.skipped:
            rows.append((f.label, "skipped", "", "", goal, "SKIP"))
            continue
        rows.append(
            (
                f.label,
                fmt(f.value, f.unit),
                fmt(f.baseline, f.unit),
                "null" if ratio is None else f"{ratio:.2f}x",
                goal,
                "ok" if f.ok else "MISS",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(f"rollouts bench ({mode}, {elapsed:.0f} s, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    for i, row in enumerate(rows):
        pairs = enumerate(zip(row, widths, strict=True))
        cells = [cell.ljust(w) if j == 0 else cell.rjust(w) for j, (cell, w) in pairs]
        print("  ".join(cells))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    notes = [f"  {f.name}: {f.note}" for f in figures if f.note]
    notes += [f"  {f.name}: skipped: {f.skipped}" for f in figures if f.skipped]
    if notes:
        print("notes:")
        print("\n".join(notes))


def pg_against_sqlite(figures: list[Figure]) -> list[Figure]:
    """The PostgreSQL end-to-end rate against the same on SQLite (figure 6, one controller, measured in this
    run): at least 0.9x (issue #49; #34 asked 0.6x), a figure of its own when both were measured."""
    found = {f.name: f for f in figures if not f.skipped}
    pg, sqlite = found.get("pg_e2e_rollouts_per_s"), found.get("e2e_rollouts_per_s_1ctl")
    if pg is None or sqlite is None:
        return []
    label = "10 PG end to end, 1 controller (baseline: the same on SQLite, figure 6)"
    return [Figure("pg_e2e_vs_sqlite", label, "/s", pg.value, sqlite.value, ">=0.9x")]
