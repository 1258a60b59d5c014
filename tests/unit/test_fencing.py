"""domain/fencing: a claim holds while it is its deployment's latest, the deployment is active with no cancel or
abort asked, and its claimant's lease is live; domain/log_writers: which log first wrote a position."""

from __future__ import annotations

from typing import Any

import pytest

from rollouts.domain.fencing import claim_verdict
from rollouts.domain.log_writers import writer_of

CREATED = (1, "Created", {"config": "web", "revision": 3})
CLAIMED = (5, "DeployerClaimed", {"attempt": 1, "claimant": "ctl-a", "step": {"kind": "deploy"}})
STARTED = (6, "DeployerStarted", {"attempt": 1})


def verdict(*events: tuple[int, str, dict[str, Any]], live: frozenset[str] = frozenset({"ctl-a"})) -> tuple[bool, str]:
    return tuple(claim_verdict(5, [CREATED, *events], lambda claimant: claimant in live))  # type: ignore[return-value]


def test_a_current_claim_of_a_running_deployment_with_a_live_claimant_holds() -> None:
    holds, why = verdict(CLAIMED, STARTED)
    assert holds and why == "web version 3 (attempt 1) is Running, claimed at position 5 by a live claimant"


@pytest.mark.parametrize(
    ("later", "said"),
    [
        ((9, "DeployerSucceeded", {"attempt": 1, "next": None}), "is Complete: the claim has ended"),
        ((9, "DeployerFailed", {"attempt": 1, "reason": "exit 1"}), "is Failed: the claim has ended"),
        ((9, "CancelRequested", {"attempt": 1}), "is being stopped (cancel or abort asked)"),
        ((9, "AbortRequested", {"attempt": 1, "reason": "bad"}), "is being stopped (cancel or abort asked)"),
        ((9, "DeployerClaimed", {"attempt": 2, "claimant": "ctl-a"}), "a later claim (position 9) replaced it"),
        (
            (9, "StopRequested", {"attempt": 1, "name": "web-3-deploy-1", "reason": "timeout: attempt exceeded 2s"}),
            "is being stopped (timeout: attempt exceeded 2s)",
        ),
    ],
)
def test_a_claim_ends_with_its_attempt_a_stop_asked_or_a_later_claim(later: Any, said: str) -> None:
    holds, why = verdict(CLAIMED, STARTED, later)
    assert not holds and said in why


def test_a_retry_after_the_claim_leaves_it_ended_even_before_the_next_claim() -> None:
    failed = (7, "DeployerFailed", {"attempt": 1, "reason": "exit 1"})
    holds, why = verdict(CLAIMED, STARTED, failed, (8, "RetryRequested", {"attempt": 2}))
    assert not holds and "is New: the claim has ended" in why


def test_a_stop_decided_for_a_step_ends_with_that_step() -> None:
    """A measurement deleted by hand is inconclusive and the attempt goes on: its next step's claim holds."""
    stop = (7, "StopRequested", {"attempt": 1, "name": "web-3-measure-1", "reason": "deleted by user"})
    recorded = (8, "MeasurementRecorded", {"attempt": 1, "next": {"kind": "verify", "name": "web-3-measure-2"}})
    assert verdict(CLAIMED, STARTED, stop, recorded)[0]


def test_the_lease_that_counts_is_the_claimant_a_takeover_handed_the_claim_to() -> None:
    taken = (7, "ClaimTaken", {"attempt": 1, "claimant": "ctl-b", "previous": "ctl-a"})
    assert verdict(CLAIMED, STARTED, taken, live=frozenset({"ctl-b"}))[0]
    holds, why = verdict(CLAIMED, STARTED, taken, live=frozenset({"ctl-a"}))
    assert not holds and why == "claimant ctl-b's lease has expired (by the database's clock)"


def test_a_claim_whose_claimant_has_no_live_lease_does_not_hold() -> None:
    holds, why = verdict(CLAIMED, STARTED, live=frozenset())
    assert not holds and "ctl-a's lease has expired" in why


def test_positions_up_to_each_origins_head_are_its_sources_through_every_move() -> None:
    origins = {"c": ("b", 70), "b": ("a", 40), "a": (None, 0)}
    writer = writer_of("c", origins.get)
    assert [writer(p) for p in (1, 40, 41, 70, 71)] == ["a", "a", "b", "b", "c"]


def test_a_loop_of_origins_ends_the_walk() -> None:
    writer = writer_of("a", {"a": ("b", 10), "b": ("a", 5)}.get)
    assert [writer(p) for p in (3, 8, 11)] == ["a", "b", "a"]
