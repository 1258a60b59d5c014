"""A small seeded chaos run (bench/chaos/run.py) with real processes: every invariant counter is clean.

Sizes come from ROLLOUTS_CHAOS_SEED, ROLLOUTS_CHAOS_CONFIGS, ROLLOUTS_CHAOS_ROLLOUTS,
ROLLOUTS_CHAOS_CONTROLLERS and ROLLOUTS_CHAOS_MINUTES when set (for longer runs); the
default is the CI size, which finishes well within three minutes on two cores. The run puts an
old copy of the log back mid-run (--restore-log), which also stands in for the old-projections
restore of a small run. A second run takes the --scale profile (many configs side by side) at a
small size, a third moves the log twice (--moves), a fourth has steps, measurements, pauses,
promote, abort and the automatic rollback (--steps), and a fifth adds analysis templates of all three
providers, a real Prometheus among them, edited while rollouts run (--templates).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


ROOT = Path(__file__).resolve().parents[2]
SIZES = {"seed": "1", "configs": "3", "rollouts": "20", "controllers": "2", "minutes": "1"}
CLEAN = (
    "duplicates",
    "sealed_not_refused",
    "move_failures",
    "completed_without_run",
    "restore_not_refused",
    "overlaps",
    "lost_writes",
    "phantom_writes",
    "unlogged_runs",
    "orphans",
    "cli_errors",
    "claims_in_freeze",
    "notifications_lost",
    "notifications_misordered",
    "notifications_bad_keys",
    "i9_violations",
    "measurement_mismatches",
    "rollback_missing",
    "rollback_twice",
    "rollback_unwanted",
    "template_claim_stale",
    "template_revision_mismatches",
)
TRUE = ("audit_ok", "views_equal_rebuild", "settled")


def sizes() -> dict[str, str]:
    return {key: os.environ.get(f"ROLLOUTS_CHAOS_{key.upper()}", default) for key, default in SIZES.items()}


def chaos(argv: list[str], budget: float) -> tuple[dict[str, Any], str]:
    """Run bench/chaos/run.py with `argv` within `budget` seconds: its result line, and what to show on failure."""
    argv = [sys.executable, str(ROOT / "bench" / "chaos" / "run.py"), *argv]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=budget)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # chaos.py stops every process it started on SIGTERM
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        pytest.fail(f"chaos run still going after {budget:.0f}s\nstderr:\n{stderr[-4000:]}")
    lines = stdout.strip().splitlines()
    assert lines, f"no output (exit {proc.returncode})\nstderr:\n{stderr[-4000:]}"
    result = json.loads(lines[-1])
    why = f"exit {proc.returncode}\nresult: {result}\nstderr:\n{stderr[-6000:]}"
    assert proc.returncode == 0, why
    for key in CLEAN:
        assert result[key] == 0, why
    for key in TRUE:
        assert result[key] is True, why
    assert result["notifications_duplicated"] <= result["controller_kills"], why  # only a send a kill cut short
    assert result["rollouts"] > 0 and result["kills"] > 0 and result["rebuilds"] > 0, why
    assert result["corruptions"] > 0 and result["freezes"] > 0, why
    return result, why


@pytest.mark.slow
def test_small_chaos_run_keeps_every_invariant() -> None:
    chosen = sizes()
    argv = [arg for key, value in chosen.items() for arg in (f"--{key}", value)]
    argv.append("--restore-log")  # an old copy of the log put back mid-run: refused, rebound, never lied about
    budget = 165 if chosen == SIZES else float(chosen["minutes"]) * 60 * 2 + 600
    result, why = chaos(argv, budget)
    assert result["seed"] == int(chosen["seed"]), why
    assert result["log_restores"] > 0, why


@pytest.mark.slow
def test_small_run_of_the_scale_profile_keeps_every_invariant() -> None:
    """--scale: 24 configs side by side, a mix weighted to triggering, short steps; the same checks."""
    result, why = chaos(["--seed", "2", "--scale", "--rollouts", "60", "--minutes", "1"], 165)
    assert (result["profile"], result["configs"], result["cli"]) == ("scale", 24, "fork"), why
    assert result["restores"] > 0, why


@pytest.mark.slow
def test_small_run_with_moves_keeps_every_invariant() -> None:
    """--moves: the log sealed and imported into a fresh store twice, the old controllers left running."""
    result, why = chaos(["--seed", "3", "--rollouts", "30", "--moves", "2", "--minutes", "2"], 240)
    assert result["moves"] == 2 and result["old_controllers_refused"] > 0, why


@pytest.mark.slow
def test_small_run_with_steps_keeps_i9_and_i10() -> None:
    """--steps: weighted steps, measurements of seeded outcome, manual pauses, promote, abort and the
    automatic rollback, through the same chaos; no step passed unverified, no rollback missing or twice."""
    result, why = chaos(["--seed", "4", "--steps", "--scale", "--rollouts", "60", "--minutes", "1"], 165)
    assert result["stepped_configs"] > 0 and result["measurements"] > 0, why
    assert result["rollbacks"] > 0 and result["measurements_by_outcome"].get("failed", 0) > 0, why


@pytest.mark.slow
def test_small_run_with_templates_holds_each_measurement_to_its_claims_revision() -> None:
    """--templates: the stepped configs name prometheus (Debian's server, fed by an app the run sets), http
    and command templates of random outcome, `analysis set` edits them mid-rollout; the same checks, and
    each measurement ran the template revision its attempt's claim fixed."""
    if shutil.which("prometheus") is None and os.environ.get("ROLLOUTS_REQUIRE_PROMETHEUS") != "1":
        pytest.skip("Debian's prometheus is not installed (apt-get install prometheus)")
    result, why = chaos(["--seed", "5", "--templates", "--scale", "--rollouts", "40", "--minutes", "0.75"], 165)
    assert result["template_runs_checked"] > 0 and result["template_edits"] > 0, why
    assert result["rollbacks"] > 0 and result["measurements_by_outcome"].get("failed", 0) > 0, why
