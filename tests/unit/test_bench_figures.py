"""bench/performance/figures.py: the PostgreSQL end-to-end rate held to its second goal, 0.9x of SQLite's (#49)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the checkout, where `bench` is
from bench.performance.figures import Figure, pg_against_sqlite  # noqa: E402


def e2e(pg: float, sqlite: float, pg_skipped: str = "") -> list[Figure]:
    return [
        Figure("pg_e2e_rollouts_per_s", "10 PG end to end", "/s", pg, None, ">=100", skipped=pg_skipped),
        Figure("e2e_rollouts_per_s_1ctl", "6 end to end", "/s", sqlite, None, ">=25"),
    ]


def test_the_pg_rate_is_held_to_nine_tenths_of_sqlites_measured_in_the_same_run() -> None:
    (met,) = pg_against_sqlite(e2e(pg=170.0, sqlite=180.0))
    assert (met.name, met.goal, met.ratio, met.ok) == ("pg_e2e_vs_sqlite", ">=0.9x", 170.0 / 180.0, True)
    (missed,) = pg_against_sqlite(e2e(pg=150.0, sqlite=200.0))  # >= 100/s and 0.6x, yet 0.75x of SQLite's
    assert missed.ratio == 150.0 / 200.0 and not missed.ok


def test_no_ratio_without_both_rates() -> None:
    assert pg_against_sqlite(e2e(pg=120.0, sqlite=180.0)[1:]) == []  # --only e2e
    assert pg_against_sqlite(e2e(pg=120.0, sqlite=180.0)[:1]) == []  # --only pg
    assert pg_against_sqlite(e2e(pg=math.nan, sqlite=180.0, pg_skipped="no server")) == []
