"""plan(): what the controller should do, decided from read models alone, with no I/O.

Nothing here is trusted blindly: every action is checked again against the
event log (claims, creates, reports) or the runtime's insert-if-absent table
before it has any effect. The plan only decides what is worth trying.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

ENDED = frozenset({"exited", "stopped", "deleted", "lost"})
REPORTS = frozenset({"record_created", "record_started", "record_exit", "record_lost"})


def is_gone(row: Any) -> bool:
    """Ended AND its processes are gone: a stopped or deleted row counts only once ended_at is set."""
    if row.state in ("stopped", "deleted"):
        return getattr(row, "ended_at", None) is not None
    return row.state in ENDED


@dataclass(frozen=True)
class Action:
    kind: str  # claim | create | record_created | record_started | record_exit | record_lost | stop | cancel | timeout
    config: str
    version: int
    attempt: int
    name: str | None = None
    exit_code: int | None = None
    reason: str | None = None


def plan(
    desired: Sequence[Mapping[str, Any]],
    observed: Mapping[str, Any],
    claimant: str,
    now: datetime,
    expired: frozenset[str] = frozenset(),
) -> list[Action]:
    """Actions for every open deployment row of the desired-deployers view.

    `observed` maps deployer names to runtime rows (objects with state,
    exit_code, reason, created_at). Deployments claimed by another controller
    are left to it, unless its lease has expired (`expired`): then they are Lost.
    """
    actions: list[Action] = []
    busy = {d["config"] for d in desired if d["phase"] != "New"}
    for d in desired:
        if d["phase"] == "New":
            if not d["cancel"] and d["config"] not in busy:
                actions.append(_act("claim", d))
                busy.add(d["config"])
        elif d["claimant"] == claimant:
            actions.extend(_active(d, observed.get(d["step"]) if d["step"] else None, now))
        elif d["claimant"] in expired:
            actions.append(_act("record_lost", d, name=d["step"], reason=f"claimant {d['claimant']} lease expired"))
    return actions


def _act(kind: str, d: Mapping[str, Any], **extra: Any) -> Action:
    return Action(kind, d["config"], d["version"], d["attempt"], **extra)


def _active(d: Mapping[str, Any], row: Any, now: datetime) -> list[Action]:
    name = d["step"]
    if d["cancel"]:
        return _cancelling(d, row)
    if _expired(d, now):
        return [_act("timeout", d, name=name, reason=f"timeout: attempt exceeded {d['timeout']}s")]
    if name is None:
        return []
    if row is None:
        if d["created"]:
            return []  # created before: never again
        return [_act("create", d, name=name)]
    actions = []
    if not d["created"]:
        actions.append(_act("record_created", d, name=name))
    if not d["started"] and (row.state == "running" or row.state == "exited"):
        actions.append(_act("record_started", d, name=name))
    if row.state == "exited":
        actions.append(_act("record_exit", d, name=name, exit_code=row.exit_code, reason=row.reason))
    elif is_gone(row):
        actions.append(_act("record_lost", d, name=name, reason=row.reason or f"deployer {row.state}"))
    return actions


def _cancelling(d: Mapping[str, Any], row: Any) -> list[Action]:
    """Stop what runs (or tombstone a name not yet created), then confirm the cancel."""
    if d["step"] and (row is None or not is_gone(row)):
        return [_act("stop", d, name=d["step"], reason="cancelled")]
    return [_act("cancel", d, name=d["step"])]


def _expired(d: Mapping[str, Any], now: datetime) -> bool:
    if not d["claimed_at"] or not d["timeout"]:
        return False
    return now - datetime.fromisoformat(d["claimed_at"]) > timedelta(seconds=d["timeout"])


def batches(actions: Sequence[Action]) -> list[tuple[Action, ...]]:
    """The actions in order, with consecutive reports about one deployer as one batch.

    A batch is decided and saved at once: a deployer seen created, started and exited in
    one pass costs one append instead of three. Every other action is a batch of its own.
    """
    out: list[tuple[Action, ...]] = []
    for action in actions:
        last = out[-1][-1] if out else None
        if last is not None and action.kind in REPORTS and last.kind in REPORTS and _same_step(last, action):
            out[-1] = (*out[-1], action)
        else:
            out.append((action,))
    return out


def _same_step(a: Action, b: Action) -> bool:
    return (a.config, a.version, a.attempt, a.name) == (b.config, b.version, b.attempt, b.name)
