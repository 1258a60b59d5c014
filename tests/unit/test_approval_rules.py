"""Who may approve, per --approval-identity (DESIGN 7.8): the domain's rule and the audit, with no database."""

from __future__ import annotations

from typing import Any

import pytest

from rollouts.domain import rollout
from rollouts.domain.approval import ApprovalIdentity, Who, refusal
from rollouts.domain.config import DeploymentConfig
from rollouts.domain.deployment import Deployment
from rollouts.domain.errors import DomainError
from rollouts.domain.gate_audit import audit_gates
from rollouts.domain.spec import Spec

LABEL, OS, DB = ApprovalIdentity.LABEL, ApprovalIdentity.OS, ApprovalIdentity.DB


def meta(actor: str, os_user: str | None = "ops@host", db_user: str | None = None) -> dict[str, Any]:
    found = {"actor": actor, "os_user": os_user, "db_user": db_user}
    return {k: v for k, v in found.items() if v is not None}


def waiting(mode: str, asked: dict[str, Any]) -> tuple[DeploymentConfig, Deployment]:
    spec = Spec(command=["true"], require_approval=True, approval_identity=mode).to_data()  # type: ignore[arg-type]
    c = DeploymentConfig(name="web", spec=spec, meta=asked)
    return c, rollout.trigger(c, [], cause="manual", message=None, supersede=False, meta=asked)[-1]


@pytest.mark.parametrize(
    ("mode", "requester", "approver", "allowed"),
    [
        (LABEL, Who("alice", "u@h"), Who("bob", "u@h"), True),
        (LABEL, Who("alice", "u@h"), Who("alice", "v@h"), False),
        (OS, Who("alice", "u@h"), Who("bob", "u@h"), False),
        (OS, Who("alice", "u@h"), Who("bob", "v@h"), True),
        (OS, Who("alice", "u@h"), Who("alice", "v@h"), False),
        (OS, Who("alice", "root@h"), Who("bob", "root@elsewhere"), False),  # a host name tells no one apart
        (OS, Who("alice", "u@h"), Who("bob", None), False),  # approved from inside a user namespace
        (OS, Who("alice", None), Who("bob", "v@h"), False),  # asked before os_user was recorded
        (DB, Who("alice", "u@h", "alice"), Who("bob", "u@h", "alice"), False),
        (DB, Who("alice", "u@h", "alice"), Who("bob", "u@h", "bob"), True),
        (DB, Who("alice", "u@h", "alice"), Who("alice", "u@h", "bob"), False),
        (DB, Who("alice", "u@h", None), Who("bob", "u@h", "bob"), False),  # asked on a store with no roles
        (DB, Who("alice", "u@h", "alice"), Who("bob", "u@h", None), False),
    ],
)
def test_each_mode_refuses_an_approver_it_cannot_tell_from_the_requester(
    mode: ApprovalIdentity, requester: Who, approver: Who, allowed: bool
) -> None:
    assert (refusal(mode, requester, approver, "revision 1 attempt 1") is None) is allowed


def test_os_mode_refuses_the_same_os_user_under_another_label() -> None:
    _, d = waiting("os", meta("alice"))
    with pytest.raises(DomainError, match="as OS user ops@host: approval identity os needs another OS user"):
        d.approve(meta("bob"))
    d.approve(meta("bob", os_user="bob@host"))
    assert d.approved_by == "bob"


def test_db_mode_refuses_the_same_database_role_under_another_label() -> None:
    _, d = waiting("db", meta("alice", db_user="shared"))
    with pytest.raises(DomainError, match="as database role shared: approval identity db needs another"):
        d.approve(meta("bob", db_user="shared"))
    with pytest.raises(DomainError, match="this approval records no database role"):
        d.approve(meta("bob"))
    d.approve(meta("bob", db_user="bob"))
    assert not d.awaits_approval


def test_a_retry_is_held_to_the_mode_the_config_has_when_it_is_retried() -> None:
    c, d = waiting("label", meta("alice", db_user="alice"))
    d.approve(meta("bob", db_user="bob"))
    rollout.claim(c, d, "ctl", meta("ctl"))
    d.report_lost(d.step.name if d.step else "", "gone", meta("ctl"))
    rollout.settle(c, d, meta("ctl"))
    c.change_spec({**c.spec, "approval_identity": "db"}, meta("alice"))
    rollout.retry(c, d, meta("carol", db_user="alice"))
    with pytest.raises(DomainError, match="approval identity db"):
        d.approve(meta("bob", db_user="alice"))
    d.approve(meta("bob", db_user="bob"))


def test_the_mode_is_left_out_of_a_spec_at_its_default_and_of_what_a_deployment_runs() -> None:
    assert "approval_identity" not in Spec(command=["x"]).to_data()
    strict = Spec(command=["x"], approval_identity="db")
    assert strict.to_data()["approval_identity"] == "db"
    assert strict.rollout_part() == Spec(command=["x"]).rollout_part()


def _gate(position: int, type_: str, data: dict[str, Any]) -> tuple[int, str, str, int, str, dict[str, Any]]:
    return (position, type_, "web", 1, "2026-12-01T12:00:00+00:00", data)


@pytest.mark.parametrize(
    ("mode", "approver", "flagged"),
    [
        ("label", meta("bob"), False),
        ("os", meta("bob"), True),
        ("os", meta("bob", os_user="bob@host"), False),
        ("db", meta("bob", db_user="alice"), True),
        ("db", meta("bob", db_user="bob"), False),
    ],
)
def test_audit_holds_a_logged_approval_to_its_attempts_mode(mode: str, approver: dict[str, Any], flagged: bool) -> None:
    spec = {"command": ["true"], "require_approval": True, "approval_identity": mode}
    auditor = audit_gates(
        [
            _gate(1, "Created", {"spec": spec, "meta": meta("alice", db_user="alice")}),
            _gate(2, "Approved", {"attempt": 1, "meta": approver}),
            _gate(3, "DeployerClaimed", {"meta": meta("ctl")}),
        ]
    )
    assert [(v.position, v.rule) for v in auditor.violations] == ([(2, "G2")] if flagged else [])
    if flagged:
        assert f"approval identity {mode}" in auditor.violations[0].message


def test_an_os_mode_request_that_records_no_os_user_is_refused_and_others_are_not() -> None:
    with pytest.raises(DomainError, match="user namespace"):
        waiting("os", meta("alice", os_user=None))
    waiting("label", meta("alice", os_user=None))  # only os mode needs the fact
    c, d = waiting("os", meta("alice"))
    d.approve(meta("bob", "other@host"))
    d.request_cancel(meta("carol"))
    with pytest.raises(DomainError, match="user namespace"):
        rollout.retry(c, d, meta("alice", os_user=None))


@pytest.mark.parametrize(
    ("old", "new", "lowered"),
    [
        ({"require_approval": True}, {}, True),
        ({"require_approval": True, "approval_identity": "os"}, {"require_approval": True}, True),
        (
            {"require_approval": True, "approval_identity": "os"},
            {"require_approval": True, "approval_identity": "db"},
            True,
        ),
        ({"require_approval": True}, {"require_approval": True, "approval_identity": "os"}, False),
        ({}, {"require_approval": True}, False),
        ({"approval_identity": "os"}, {}, False),  # no approval required: nothing to lower
    ],
)
def test_what_lowers_a_guard(old: dict[str, Any], new: dict[str, Any], lowered: bool) -> None:
    from rollouts.domain.approval import lowers

    assert lowers({"command": ["true"], **old}, {"command": ["true"], **new}) is lowered


def test_a_lowered_guard_waits_for_another_identity_under_the_configs_current_mode() -> None:
    c, _ = waiting("os", meta("alice", "ops@host"))
    weaker = {k: v for k, v in c.spec.items() if k != "approval_identity"}
    assert c.change_spec(weaker, meta("alice", "ops@host"))
    assert c.spec["approval_identity"] == "os" and c.pending_guard is not None  # the old policy holds
    with pytest.raises(DomainError, match="another OS user"):
        c.approve_guard(meta("bob", "ops@elsewhere"))  # same account, another host: the same person
    c.approve_guard(meta("bob", "bob@host"))
    assert c.spec == weaker and c.pending_guard is None
    with pytest.raises(DomainError, match="no lowering"):
        c.approve_guard(meta("carol", "carol@host"))
