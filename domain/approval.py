"""Who may approve an attempt (DESIGN 7.8): the rule of each `--approval-identity`, from the events' metadata.

Every mode keeps the four-eyes rule on labels (the `--as` actors differ). `os` also needs the OS accounts
that ran the two commands (`os_user`) to differ; `db` the database roles (`db_user`, the PostgreSQL
session user the server checked at each insert). A fact the log does not hold (an event written before
it was recorded, or on a store with no roles) proves nothing: the approval is refused. An OS user is
`ACCOUNT@HOST`: only the account tells two people apart (7.11: a host name is anyone's to set); one run
inside a user namespace records none (adapters/identity), so an `os`-mode request or approval from there
is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ApprovalIdentity(StrEnum):
    LABEL = "label"
    OS = "os"
    DB = "db"


DEFAULT = ApprovalIdentity.LABEL


@dataclass(frozen=True)
class Who:
    """Who recorded an event, as its metadata says."""

    actor: str | None = None
    os_user: str | None = None
    db_user: str | None = None

    @classmethod
    def of(cls, meta: Mapping[str, Any]) -> Who:
        return cls(meta.get("actor"), meta.get("os_user"), meta.get("db_user"))


# The facts each mode compares, beyond the label: (field of Who, how a refusal names it).
_FACTS: dict[ApprovalIdentity, tuple[tuple[str, str], ...]] = {
    ApprovalIdentity.LABEL: (),
    ApprovalIdentity.OS: (("os_user", "OS user"),),
    ApprovalIdentity.DB: (("db_user", "database role"),),
}


def mode_of(value: str | None) -> ApprovalIdentity:
    """The mode a spec or an event names (absent: the default, as written before modes existed)."""
    return ApprovalIdentity(value) if value else DEFAULT


def _same(field: str, asked: str, approving: str) -> bool:
    """Whether two recorded facts name one identity: an OS user by its account alone, not its host."""
    if field == "os_user":
        return asked.rpartition("@")[0] == approving.rpartition("@")[0]
    return asked == approving


def request_refusal(mode: ApprovalIdentity, needs_approval: bool, requester: Who, what: str) -> str | None:
    """Why `requester` may not ask for `what` (an attempt that waits for an approval under `mode`): an
    `os`-mode request must record the OS user its approver is told apart from. None when they may."""
    if needs_approval and mode == ApprovalIdentity.OS and requester.os_user is None:
        return (
            f"approval identity os: {what} would record no OS user (run inside a user namespace, which proves"
            " no account): ask from the host's own user namespace"
        )
    return None


def refusal(mode: ApprovalIdentity, requester: Who, approver: Who, what: str) -> str | None:
    """Why `approver` may not approve `what` (an attempt) that `requester` asked for under `mode`; None
    when they may."""
    if approver.actor == requester.actor:
        return f"{requester.actor} asked for {what}: another actor must approve it"
    for field, named in _FACTS[mode]:
        asked, approving = getattr(requester, field), getattr(approver, field)
        if asked is None or approving is None:
            whose = f"the request for {what}" if asked is None else "this approval"
            return f"approval identity {mode}: {whose} records no {named}, so the two cannot be told apart"
        if _same(field, asked, approving):
            return (
                f"{requester.actor} asked for {what} as {named} {asked}: approval identity {mode} needs"
                f" another {named} to approve it"
            )
    return None


# A config's approval guard: the spec keys that say whether and how a deployment waits for an approval.
GUARD = ("require_approval", "approval_identity")


def lowers(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether spec `new` lowers the guard of spec `old` (7.11): it drops `--require-approval`, or moves
    `--approval-identity` away from `os` or `db` (to label, or to the other fact, which proves another thing)."""
    if not old.get("require_approval"):
        return False
    if not new.get("require_approval"):
        return True
    was = mode_of(old.get("approval_identity"))
    return was != DEFAULT and mode_of(new.get("approval_identity")) != was


def with_guard(spec: Mapping[str, Any], guard: Mapping[str, Any]) -> dict[str, Any]:
    """`spec` with the guard keys of `guard` (left out where `guard` has none, as a stored spec leaves out
    a guard off or at its default)."""
    out = {k: v for k, v in spec.items() if k not in GUARD}
    out.update({k: guard[k] for k in GUARD if guard.get(k)})
    return out
