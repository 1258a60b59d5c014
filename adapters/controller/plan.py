"""plan(): what the controller should do, decided from read models alone, with no I/O.

Nothing here is trusted blindly: every action is checked again against the
event log (claims, creates, reports) or the runtime's insert-if-absent table
before it has any effect. The plan only decides what is worth trying.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from ...domain import phases
from ...domain.step import PAUSE, VERIFY
from ...projections import freezes
from ..runtime.port import Observed

ENDED = frozenset({"exited", "stopped", "deleted", "lost"})
UNKNOWN_TO_RUNTIME = (
    "the runtime has no row for this deployer (runtime.db deleted or replaced?): its processes are unknown"
)


class Kind(StrEnum):
    """What an action does. The executor has exactly one handler for each (tests/unit/test_executor_guards.py)."""

    CLAIM = "claim"  # claim the slot for a New deployment, then create its first step
    CREATE = "create"  # start the current step of a committed claim
    RECORD_CREATED = "record_created"  # the reports: what the runtime's row shows, recorded in the log
    RECORD_STARTED = "record_started"
    RECORD_EXIT = "record_exit"
    RECORD_LOST = "record_lost"
    STOP = "stop"  # a cancel: stop what runs (or tombstone its name), then confirm the cancel
    CANCEL = "cancel"  # a cancel with nothing left running: confirm it
    TIMEOUT = "timeout"  # an attempt past its timeout: stop what runs, then fail it
    END_PAUSE = "end_pause"  # a timed pause that has run its time: go on
    STOP_MEASUREMENT = "stop_measurement"  # a measurement past --verify-timeout: stop it (it is then inconclusive)
    TAKE_OVER = "take_over"  # a claim whose claimant's lease ended while nothing ran: go on with it


REPORTS = frozenset({Kind.RECORD_CREATED, Kind.RECORD_STARTED, Kind.RECORD_EXIT, Kind.RECORD_LOST})


def is_gone(row: Observed) -> bool:
    """Ended AND its processes are gone: a stopped or deleted row counts only once ended_at is set."""
    if row.state in ("stopped", "deleted"):
        return row.ended_at is not None
    return row.state in ENDED


@dataclass(frozen=True)
class Action:
    kind: Kind
    config: str
    revision: int
    attempt: int
    name: str | None = None
    exit_code: int | None = None
    reason: str | None = None


def gated(d: Mapping[str, Any], frozen: Mapping[str, Mapping[str, Any]], now: datetime) -> bool:
    """Whether a New deployment waits for an approval, or for a freeze in force at `now` to end
    (`frozen`: the freezes the log has not lifted, by stream, as projections.freezes reads them)."""
    if d["phase"] != phases.NEW:
        return False
    return bool(d.get("approval")) or bool(freezes.in_force_for(d["config"], frozen, now))


def plan(
    desired: Sequence[Mapping[str, Any]],
    observed: Mapping[str, Observed | None],
    claimant: str,
    now: datetime,
    expired: frozenset[str] = frozenset(),
    frozen: Mapping[str, Mapping[str, Any]] | None = None,
    runtime_born: str | None = None,
) -> list[Action]:
    """Actions for every open deployment row of the desired-deployers view.

    `observed` maps deployer names to runtime rows (objects with state,
    exit_code, reason, created_at). Deployments claimed by another controller
    are left to it, unless its lease has expired (`expired`): then they are Lost.
    A deployment that waits for an approval or a freeze (`gated`) is not claimed; the
    claim would be refused anyway, on the aggregates (domain/rollout.claim). A step of ours the
    runtime has no row for, created or claimed before the runtime's table was made
    (`runtime_born`: runtime.db deleted), is Lost: its processes are unknown, and never made again.
    """
    actions: list[Action] = []
    busy = {d["config"] for d in desired if d["phase"] != phases.NEW}
    ahead: set[str] = set()  # configs with an older open row: a New one behind it is queued (7.10), not due
    for d in desired:
        queued = d["config"] in ahead
        if d["phase"] != phases.NEW or not d["cancel"]:  # (a New one being cancelled holds nothing back)
            ahead.add(d["config"])
        if d["phase"] == phases.NEW:
            if not d["cancel"] and d["config"] not in busy and not queued and not gated(d, frozen or {}, now):
                actions.append(_act(Kind.CLAIM, d))
                busy.add(d["config"])
        elif d["claimant"] == claimant:
            actions.extend(_active(d, observed.get(d["step"]) if d["step"] else None, now, runtime_born))
        elif d["claimant"] in expired and _nothing_runs(d) and not d["cancel"]:
            actions.append(_act(Kind.TAKE_OVER, d, name=d["step"]))
        elif d["claimant"] in expired:
            reason = f"claimant {d['claimant']} lease expired"
            actions.append(_act(Kind.RECORD_LOST, d, name=d["step"], reason=reason))
    return actions


def _act(kind: Kind, d: Mapping[str, Any], **extra: Any) -> Action:  # why: Action's other fields
    return Action(kind, d["config"], d["revision"], d["attempt"], **extra)


def _active(d: Mapping[str, Any], row: Observed | None, now: datetime, born: str | None) -> list[Action]:
    name = d["step"]
    if d["cancel"]:
        return _cancelling(d, row)
    if _expired(d, now):
        return [_act(Kind.TIMEOUT, d, name=name, reason=f"timeout: attempt exceeded {d['timeout']}s")]
    if name is None:
        return []
    if d.get("step_kind") == PAUSE:
        return [_act(Kind.END_PAUSE, d, name=name)] if _due(d, now) else []
    if row is None:
        if d["created"] or _claimed_before(d, born):  # a create's row is committed first: the runtime lost it
            return [_act(Kind.RECORD_LOST, d, name=name, reason=UNKNOWN_TO_RUNTIME)]  # and never create it again
        if d.get("step_kind") == VERIFY and not _due(d, now):
            return []  # the measurement's interval after the one before has not passed
        return [_act(Kind.CREATE, d, name=name)]
    actions = []
    if not d["created"]:
        actions.append(_act(Kind.RECORD_CREATED, d, name=name))
    if not d["started"] and (row.state == "running" or row.state == "exited"):
        actions.append(_act(Kind.RECORD_STARTED, d, name=name))
    if row.state == "exited":
        actions.append(_act(Kind.RECORD_EXIT, d, name=name, exit_code=row.exit_code, reason=row.reason))
    elif is_gone(row):
        actions.append(_act(Kind.RECORD_LOST, d, name=name, reason=row.reason or f"deployer {row.state}"))
    elif d.get("step_kind") == VERIFY and d["created"] and _measuring_too_long(d, now):
        reason = f"timeout: measurement exceeded {d['verify_timeout']}s"
        actions.append(_act(Kind.STOP_MEASUREMENT, d, name=name, reason=reason))
    return actions


def waits_for_human(d: Mapping[str, Any]) -> bool:
    """A deployment paused for `rollout promote`: it keeps its slot, but no --until-idle controller."""
    return d.get("step_kind") == PAUSE and d.get("step_delay") is None and d["phase"] in phases.ACTIVE


def _nothing_runs(d: Mapping[str, Any]) -> bool:
    """A claim with no process now (paused, or between measurements): lease expiry does not end it."""
    return d.get("step_kind") == PAUSE or (d.get("step_kind") == VERIFY and not d["created"])


def _due(d: Mapping[str, Any], now: datetime) -> bool:
    """Whether a pause or a measurement's wait has passed, from the log's timestamp of its step."""
    if d.get("step_delay") is None:
        return False  # waits for a human
    if not d.get("step_delay") or not d.get("step_at"):
        return True
    return now >= datetime.fromisoformat(d["step_at"]) + timedelta(seconds=d["step_delay"])


def _measuring_too_long(d: Mapping[str, Any], now: datetime) -> bool:
    if not d.get("step_at") or not d.get("verify_timeout"):
        return False
    return now > datetime.fromisoformat(d["step_at"]) + timedelta(seconds=d["verify_timeout"])


def _cancelling(d: Mapping[str, Any], row: Observed | None) -> list[Action]:
    """Stop what runs (or tombstone a name not yet created), then confirm the cancel."""
    if d["step"] and (row is None or not is_gone(row)):
        return [_act(Kind.STOP, d, name=d["step"], reason="cancelled")]
    return [_act(Kind.CANCEL, d, name=d["step"])]


def _claimed_before(d: Mapping[str, Any], born: str | None) -> bool:
    """Whether the attempt was claimed before the runtime's table was made: its step may have been
    created in the table that was lost."""
    at = d.get("step_at") or d["claimed_at"]  # when the step became current (a later step: after its claim)
    if born is None or not at:
        return False
    return datetime.fromisoformat(at) < datetime.fromisoformat(born)


def _expired(d: Mapping[str, Any], now: datetime) -> bool:
    """Past --timeout since the claim, time paused for a human not counted (7.6)."""
    if not d["claimed_at"] or not d["timeout"] or waits_for_human(d):
        return False
    held = timedelta(seconds=d.get("held") or 0.0)
    return now - datetime.fromisoformat(d["claimed_at"]) - held > timedelta(seconds=d["timeout"])


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
    return (a.config, a.revision, a.attempt, a.name) == (b.config, b.revision, b.attempt, b.name)
