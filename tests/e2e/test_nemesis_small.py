"""Faults between hosts (bench/nemesis/run.py, DESIGN 7.7): three controllers in network namespaces of the
run's own making share one PostgreSQL log through fault proxies; partitions, lost replies, delays,
resets, paused hosts, stepped clocks, killed connections and killed controllers; 0 violations by a
checker that reads the deployers' own ground truth.

The CI size runs for about a minute where `ip netns add` works (root); it skips elsewhere, and
where PostgreSQL is unreachable (it fails then with ROLLOUTS_REQUIRE_POSTGRES=1). The full size
(1,000 rollouts, 300 fault windows) runs with ROLLOUTS_NEMESIS=1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import POSTGRES, postgres_reachable

pytestmark = pytest.mark.slow  # real processes, namespaces (see tests/test_tiers.py)

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("partition", "replies_lost", "delay", "reset", "pause", "clock_step", "terminate", "kill")


def preconditions() -> None:
    why = nemesis_net_module().unavailable()
    if why is not None:
        pytest.skip(f"no network namespaces here: {why}")
    unreachable = postgres_reachable()
    if unreachable is not None:
        if os.environ.get("ROLLOUTS_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required (ROLLOUTS_REQUIRE_POSTGRES=1) but unreachable: {unreachable}")
        pytest.skip(f"PostgreSQL unreachable at {POSTGRES}: {unreachable}")


def nemesis(argv: list[str], budget: float) -> tuple[dict[str, Any], str]:
    argv = [sys.executable, str(ROOT / "bench" / "nemesis" / "run.py"), "--store", POSTGRES, *argv]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=budget)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # nemesis.py removes its namespaces and stops its processes
        stdout, stderr = proc.communicate(timeout=120)
        pytest.fail(f"nemesis run still going after {budget:.0f}s\nstderr:\n{stderr[-4000:]}")
    lines = stdout.strip().splitlines()
    assert lines, f"no output (exit {proc.returncode})\nstderr:\n{stderr[-4000:]}"
    result = json.loads(lines[-1])
    why = f"exit {proc.returncode}\nresult: {result}\nstderr:\n{stderr[-6000:]}"
    assert proc.returncode == 0, why
    assert result["violations"] == {} and result["settled"] is True, why
    assert all(result["fault_windows_by_kind"].get(kind, 0) > 0 for kind in KINDS), why
    assert result["backends_terminated"] > 0, why  # the run's own connections (its application_name) only
    assert result["rollouts"] > 0 and result["gt_ticks"] > 0, why
    return result, why


def test_small_nemesis_run_keeps_every_invariant() -> None:
    preconditions()
    nemesis(["--seed", "1", "--lease", "3", "--minutes", "0.5", "--rollouts", "200"], 170)


@pytest.mark.skipif(os.environ.get("ROLLOUTS_NEMESIS") != "1", reason="the full size: set ROLLOUTS_NEMESIS=1")
def test_full_nemesis_run_keeps_every_invariant() -> None:
    preconditions()
    result, why = nemesis(["--seed", "7", "--rollouts", "1000", "--minutes", "90", "--min-faults", "300"], 7200)
    assert result["rollouts"] >= 1000 and result["fault_windows"] >= 300, why
    assert min(result["fault_windows_by_kind"].values()) >= 40, why


def test_a_run_removes_what_a_dead_run_left_and_nothing_of_a_live_one() -> None:
    """Two suites on one machine once ran their nemesis side by side: the second's start removed every
    `nmz` namespace, the first run's live hosts included. Now a leftover goes only once its run's tag
    is free (the run that held it is gone)."""
    net = nemesis_net_module()
    why = net.unavailable()
    if why is not None:
        pytest.skip(f"no network namespaces here: {why}")
    tag, lock = net.claim_tag()
    name = f"{net.PREFIX}{tag:04x}h9"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert name not in net.cleanup_leftovers()
        assert name in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        other, other_lock = net.claim_tag()  # a second live run gets a tag (and a subnet) of its own
        assert other != tag
        other_lock.close()
        lock.close()  # the run is gone
        assert name in net.cleanup_leftovers()
        assert name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    finally:
        lock.close()
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def nemesis_net_module() -> Any:
    sys.path.insert(0, str(ROOT))  # the checkout, where `bench` is
    from bench.nemesis import net as nemesis_net

    return nemesis_net
