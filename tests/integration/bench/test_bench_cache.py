"""bench/performance/generate.py's cached logs: benchmarks started together share one generation, never mix two."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)

ROOT = Path(__file__).resolve().parents[3]
EVENTS = 8000
SCRIPT = f"""
import sqlite3, sys
sys.path.insert(0, sys.argv[1])
from bench.performance.generate import cached_log
home = cached_log({EVENTS}, 10, False)
print(home.path)
print(sqlite3.connect(home.path / "events.db").execute("SELECT count(*) FROM stored_events").fetchone()[0])
"""


def generating(tmp: Path) -> subprocess.Popen[str]:
    """A benchmark process asking for the cached log; it prints the folder, then the events it found there."""
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(ROOT)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def events_in(home: str) -> list[tuple[str, int, str]]:
    conn = sqlite3.connect(Path(home) / "events.db")
    try:
        return conn.execute(
            "SELECT originator_id, originator_version, topic FROM stored_events ORDER BY rowid"
        ).fetchall()
    finally:
        conn.close()


def test_two_benchmarks_asking_for_the_same_new_cache_get_one_whole_log(tmp_path: Path) -> None:
    """Regression: both removed the folder and generated into it at once; the cache then held events of
    both generators (a 200k cache ended at 135,786 events, marked complete)."""
    alone_tmp, shared_tmp = tmp_path / "alone", tmp_path / "shared"
    alone_tmp.mkdir()
    shared_tmp.mkdir()
    alone = generating(alone_tmp)
    out, err = alone.communicate(timeout=300)
    assert alone.returncode == 0, err
    home, count = out.split()
    expected = events_in(home)
    assert int(count) == len(expected) >= EVENTS

    first = generating(shared_tmp)
    while not (shared_tmp / f"{Path(home).name}" / "events.db").exists():  # the first is generating
        assert first.poll() is None, first.communicate()
        time.sleep(0.05)
    time.sleep(0.5)
    second = generating(shared_tmp)
    for proc in (first, second):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        shared, count = out.split()
        assert Path(shared).name == Path(home).name
        # What each found when the cache was handed to it: one whole generation, in its order.
        assert int(count) == len(expected), f"{count} events in the cache handed over, not {len(expected)}"
    assert [topic for _, _, topic in events_in(shared)] == [topic for _, _, topic in expected]
