"""Two real CLI loops hammering one config at once: no crash, nothing acknowledged is lost, I1-I3 hold."""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts

ITERATIONS = 15
LOOPS = 2
BUDGET = 40.0  # seconds: a loaded machine runs fewer iterations rather than a longer test


def hammer(rollouts: Rollouts, loop: int, deadline: float, results: list[tuple[tuple[str, ...], Result]]) -> None:
    """One loop of real subprocesses; each command and its result is kept in order."""
    for i in range(ITERATIONS):
        if i >= 3 and time.monotonic() > deadline:
            break
        for args in (
            ("rollout", "latest", "web", "--supersede"),
            ("rollout", "cancel", "web"),
            ("config", "set", "web", "--env", f"N{loop}={i}"),
            ("rollout", "pause" if i % 2 == 0 else "resume", "web"),
        ):
            results.append((args, rollouts.sh(*args)))


@pytest.fixture
def hammered(rollouts: Rollouts) -> list[tuple[tuple[str, ...], Result]]:
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    results: list[list[tuple[tuple[str, ...], Result]]] = [[] for _ in range(LOOPS)]
    deadline = time.monotonic() + BUDGET
    threads = [threading.Thread(target=hammer, args=(rollouts, n, deadline, results[n])) for n in range(LOOPS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    return [entry for loop in results for entry in loop]


def printed_versions(hammered: list[tuple[tuple[str, ...], Result]]) -> list[int]:
    return [int(r.stdout) for args, r in hammered if args[1] == "latest" and r.exit_code == 0]


@pytest.mark.slow
def test_two_loops_at_once_leave_a_consistent_log(
    rollouts: Rollouts, hammered: list[tuple[tuple[str, ...], Result]]
) -> None:
    assert len(hammered) >= LOOPS * 3 * 4
    for args, result in hammered:
        assert result.exit_code in (0, 1, 3), (args, result)
        assert "Traceback" not in result.stdout + result.stderr, (args, result)
        if result.exit_code:
            assert result.stderr.startswith("error:") and len(result.stderr.splitlines()) == 1, (args, result)

    versions = printed_versions(hammered)
    assert versions, "no rollout latest succeeded"
    assert len(set(versions)) == len(versions), "two commands acknowledged the same version"

    rows = json.loads(rollouts.run("rollout", "history", "web", "-o", "json").stdout)
    assert set(versions) <= {row["version"] for row in rows}

    audit = rollouts.run("audit")
    assert audit.exit_code == 0, audit

    triggered = json.loads(rollouts.run("events", "--type", "RolloutTriggered", "-o", "json").stdout)
    assert len(triggered) == len(versions)
    assert sorted(versions) == list(range(1, len(versions) + 1))
