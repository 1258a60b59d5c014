"""domain.audit over hand-built histories: what it flags as a break of I1, I2 or I3, and how it says so."""

from __future__ import annotations

from typing import Any

from rollouts.domain.audit import Auditor, audit

Row = tuple[str, int, dict[str, Any]]


def claimed(revision: int, attempt: int = 1) -> Row:
    name = f"app-{revision}-deploy-{attempt}"
    return ("DeployerClaimed", revision, {"attempt": attempt, "name": name, "step": {"kind": "deployer", "name": name}})


def ev(type_: str, revision: int = 1, attempt: int = 1, **data: Any) -> Row:
    return (type_, revision, {"attempt": attempt, "name": f"app-{revision}-deploy-{attempt}", **data})


def run(revision: int, ok: bool = True) -> list[Row]:
    """A revision that is created, claimed, created, started and ends."""
    end = ev("DeployerSucceeded", revision, next=None) if ok else ev("DeployerFailed", revision, reason="exit 1")
    started = [ev("DeployerCreated", revision), ev("DeployerStarted", revision)]
    return [ev("Created", revision), claimed(revision), *started, end]


def audited(*rows: Row) -> Auditor:
    """Audit `rows` of config app, at positions 1, 2, ..."""
    auditor = audit((i, type_, "app", revision, data) for i, (type_, revision, data) in enumerate(rows, start=1))
    assert auditor.count == len(rows)
    return auditor


def check(*rows: Row) -> list[tuple[str, int | None, int]]:
    """(rule, revision, position) of each violation in `rows`."""
    return [(v.rule, v.revision, v.position) for v in audited(*rows).violations]


def messages(*rows: Row) -> list[str]:
    return [v.message for v in audited(*rows).violations]


PRE_TRY_2 = {"kind": "pre", "name": "app-3-hook-pre-1-2"}


def test_clean_history_has_no_violations() -> None:
    hooked = [
        ev("Created", 3),
        ("DeployerClaimed", 3, {"step": {"kind": "pre", "name": "app-3-hook-pre-1"}}),
        ("HookCreated", 3, {"name": "app-3-hook-pre-1"}),
        ("HookFailed", 3, {"name": "app-3-hook-pre-1", "outcome": "retry", "next": PRE_TRY_2}),
        ("HookCreated", 3, {"name": "app-3-hook-pre-1-2"}),
        ("HookSucceeded", 3, {"name": "app-3-hook-pre-1-2", "next": {"kind": "deployer", "name": "app-3-deploy-1"}}),
        ev("DeployerCreated", 3),
        ev("DeployerSucceeded", 3, next=None),
    ]
    retried = [ev("RetryRequested", 2, attempt=2), claimed(2, 2), ev("DeployerSucceeded", 2, 2, next=None)]
    assert check(*run(1), *run(2, ok=False), *retried, *hooked) == []


def test_history_with_a_cancel_has_no_violations() -> None:
    assert check(ev("Created"), ev("CancelRequested"), ev("Created", 2), claimed(2), ev("CancelRequested", 2)) == []


def test_same_deployer_claimed_twice_is_an_i1_violation() -> None:
    rows = [*run(1, ok=False), ev("RetryRequested", attempt=2), claimed(1, attempt=1)]
    assert check(*rows) == [("I1", 1, 7)]


def test_same_deployer_created_twice_is_an_i1_violation() -> None:
    rows = [ev("Created"), claimed(1), ev("DeployerCreated"), ev("DeployerCreated")]
    assert check(*rows) == [("I1", 1, 4)]
    assert messages(*rows) == ["deployer app-1-deploy-1 created twice (first at position 3)"]


def test_same_hook_created_twice_is_an_i1_violation() -> None:
    hook = ("HookCreated", 1, {"name": "app-1-hook-pre-1"})
    assert check(ev("Created"), claimed(1), hook, hook) == [("I1", 1, 4)]


def test_two_revisions_of_one_config_active_at_once_is_an_i2_violation() -> None:
    rows = [ev("Created"), claimed(1), ev("Created", 2), claimed(2)]
    assert check(*rows) == [("I2", 2, 4)]
    assert messages(*rows) == ["revision 2 active while revision 1 was active too"]


def test_active_revisions_of_different_configs_are_no_violation() -> None:
    rows = [
        (1, "Created", "a", 1, {}),
        (2, "DeployerClaimed", "a", 1, {"step": {"name": "a-1-deploy-1"}}),
        (3, "Created", "b", 1, {}),
        (4, "DeployerClaimed", "b", 1, {"step": {"name": "b-1-deploy-1"}}),
    ]
    assert audit(rows).violations == []


def test_deployer_started_after_complete_is_an_i3_violation() -> None:
    rows = [*run(1), ev("DeployerStarted")]
    assert {rule for rule, _, _ in check(*rows)} == {"I3"}
    assert messages(*rows) == [
        "DeployerStarted happened in phase Complete",
        "phase went back from Complete to Running by DeployerStarted",
    ]


def test_claim_of_a_failed_deployment_without_retry_is_an_i3_violation() -> None:
    rows = [*run(1, ok=False), claimed(1, attempt=2)]
    assert ("I3", 1, 6) in check(*rows)


def test_retry_of_a_complete_deployment_is_an_i3_violation() -> None:
    assert check(*run(1), ev("RetryRequested", attempt=2)) == [("I3", 1, 6)]


def test_violation_reads_as_a_sentence_and_serialises() -> None:
    (violation,) = audited(ev("Created"), claimed(1), ev("Created", 2), claimed(2)).violations
    assert violation.as_dict() == {
        "position": 4,
        "config": "app",
        "version": 2,
        "rule": "I2",
        "message": "revision 2 active while revision 1 was active too",
    }


def test_every_violation_message_is_one_line_that_names_what_broke() -> None:
    rows = [*run(1), ev("DeployerCreated"), ev("DeployerStarted"), ev("Created", 2), claimed(2), claimed(1)]
    found = audited(*rows).violations
    assert {v.rule for v in found} == {"I1", "I2", "I3"}
    for v in found:
        assert v.message and "\n" not in v.message and "{" not in v.message and "None" not in v.message
        assert any(word in v.message for word in ("app-1-deploy-1", "revision", "phase"))
