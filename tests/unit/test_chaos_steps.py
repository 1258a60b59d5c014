"""The chaos runner's checks of the automatic rollback (bench/chaos/steps.py) on hand-made logs: a
failure that calls for a rollback and has none, one rolled back twice, one rolled back that called for none."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the checkout, where `bench` is
from bench.chaos import run as chaos  # noqa: E402

POSITION = iter(range(1, 10_000))


def ev(kind: str, version: int | None, **data: Any) -> dict[str, Any]:
    return {"position": next(POSITION), "type": kind, "config": "web", "version": version, "data": data}


def triggered(version: int, cause: str = "manual", message: str = "") -> list[dict[str, Any]]:
    return [
        ev("RolloutTriggered", version, revision=version, cause=cause),
        ev("Created", version, cause=cause, message=message, spec={}),
        ev("DeployerClaimed", version, attempt=1),
        ev("DeployerStarted", version, attempt=1),
    ]


def rollback(failed: int, version: int, to: int = 1) -> list[dict[str, Any]]:
    return [
        *triggered(version, f"automatic rollback to {to}", f"version {failed} failed: deployer failed"),
        ev("DeployerSucceeded", version, attempt=1),
    ]


def found(events: list[dict[str, Any]], auto: bool = True) -> dict[str, list[Any]]:
    log = [{**ev("Registered", None, spec={"auto_rollback": auto}), "position": 0}, *events]
    verdict = chaos.Verdict()
    runner = SimpleNamespace(counts=Counter())
    chaos.Chaos.check_rollbacks(runner, verdict, log, {})  # type: ignore[arg-type]
    return dict(verdict.details)


HISTORY = [*triggered(1), ev("DeployerSucceeded", 1, attempt=1), *triggered(2)]
FAILED_2 = ev("DeployerFailed", 2, attempt=1, reason="deployer failed")


def test_a_failure_with_auto_rollback_and_exactly_one_rollback_is_clean() -> None:
    assert found([*HISTORY, FAILED_2, *rollback(2, 3)]) == {}


def test_a_failure_with_auto_rollback_and_none_is_missing_one() -> None:
    assert [f["failed"] for f in found([*HISTORY, FAILED_2])["rollback_missing"]] == [("web", 2)]


def test_a_rollback_to_another_revision_is_not_the_one_due() -> None:
    assert found([*HISTORY, FAILED_2, *rollback(2, 3, to=2)])["rollback_missing"][0]["to"] == 1


def test_two_rollbacks_of_one_failure_are_reported() -> None:
    assert found([*HISTORY, FAILED_2, *rollback(2, 3), *rollback(2, 4)])["rollback_twice"][0]["rollbacks"] == [3, 4]


def test_a_cancel_or_a_config_without_auto_rollback_calls_for_none() -> None:
    cancelled = [*HISTORY, ev("CancelRequested", 2, attempt=1), ev("Cancelled", 2, attempt=1)]
    assert found(cancelled) == {}
    assert "rollback_unwanted" in found([*cancelled, *rollback(2, 3)])
    assert found([*HISTORY, FAILED_2], auto=False) == {}
    aborted = ev("Aborted", 2, attempt=1, reason="aborted: error rate")
    assert [f["failed"] for f in found([*HISTORY, aborted], auto=False)["rollback_missing"]] == [("web", 2)]


def test_a_failed_rollback_is_not_rolled_back_again() -> None:
    failed_rollback = ev("DeployerFailed", 3, attempt=1, reason="deployer failed")
    assert found([*HISTORY, FAILED_2, *rollback(2, 3), failed_rollback]) == {}
    assert "rollback_unwanted" in found([*HISTORY, FAILED_2, *rollback(2, 3), failed_rollback, *rollback(3, 4)])
