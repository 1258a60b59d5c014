"""bench/performance/growth.py: the same commands on a log twice as long, and the peak memory of a process tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real processes: generated logs, rebuilds, audits (see tests/test_tiers.py)

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))  # the checkout, where `bench` is
from bench.performance.growth import tree_peak  # noqa: E402

MIB = 1024
# A parent that forks, then each of the two holds 64 MiB of its own for a while: their sum is the tree's peak.
TWO_HOLDERS = """
import os, time
pid = os.fork()
held = b"x" * (64 << 20)
time.sleep(0.5)
if pid:
    os.waitpid(pid, 0)
"""


def test_the_peak_sums_the_memory_of_the_process_and_its_children() -> None:
    run = tree_peak([sys.executable, "-c", TWO_HOLDERS])
    assert run.code == 0, run.output
    assert len(run.hwm_kib) == 2  # the parent and its child, each seen
    assert all(64 * MIB <= kib < 120 * MIB for kib in run.hwm_kib.values()), run.hwm_kib
    assert run.peak_kib >= 128 * MIB > max(run.hwm_kib.values())
    assert run.maxrss_kib >= 64 * MIB


def test_both_parts_print_each_command_at_the_larger_log_against_the_smaller(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the small logs are generated and cached here, not in /tmp
    env.pop("ROLLOUTS_HOME", None)
    sizes = ["--small", "3000", "--large", "6000", "--configs", "10", "--runs", "2", "--rss-runs", "1"]
    done = subprocess.run(
        [sys.executable, "bench/performance/growth.py", *sizes],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert (found["small"], found["large"]) == (3000, 6000)
    expected = {
        "rss": ({"rebuild", "audit"}, "<=1.2x", "MiB"),
        "cli": ({"status", "history_json", "latest"}, "<=1.1x", "ms"),
    }
    for part, (commands, goal, unit) in expected.items():
        assert set(found[part]) == commands
        for command, figure in found[part].items():
            assert (figure["goal"], figure["unit"]) == (goal, unit), command
            assert figure["value"] > 0 and figure["baseline"] > 0, command
            assert figure["ratio"] == pytest.approx(figure["value"] / figure["baseline"], rel=1e-2)
            assert len(figure["runs"]["large"]) == len(figure["runs"]["small"]) == (1 if part == "rss" else 2)
    assert not list(tmp_path.glob("rollouts-bench-growth-*")), "the scratch homes are removed"
