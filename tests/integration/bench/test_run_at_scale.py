"""bench/run.py prints the figures issue #34 names at scale, each with a baseline from the same run and a goal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real processes: a server, audits, rebuilds (see tests/test_tiers.py)

ROOT = Path(__file__).resolve().parents[3]
NAMES = {
    "rebuild1m": {"rebuild_1m_events_per_s": ">=1.0x"},
    "audit": {"audit_events_per_s": ">=0.6x"},
    "serve": {
        "metrics_after_event_p50_ms": "<=1.0x",
        "metrics_after_event_p99_ms": "<=1.0x",
        "metrics_remade_ms": "<=2.0x",
    },
}


def test_the_at_scale_sections_print_each_figure_with_its_baseline_and_goal(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the small logs are generated and cached here, not in /tmp
    env.pop("ROLLOUTS_HOME", None)
    done = subprocess.run(
        [sys.executable, "bench/run.py", "--quick", "--json", "--only", ",".join(NAMES)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    expected = {name: goal for section in NAMES.values() for name, goal in section.items()}
    assert set(figures) == set(expected)
    for name, goal in expected.items():
        figure = figures[name]
        assert figure["goal"] == goal
        assert figure["value"] > 0 and figure["baseline"] > 0, name
        assert figure["ratio"] == pytest.approx(figure["value"] / figure["baseline"], rel=1e-2)
        assert isinstance(figure["ok"], bool)
