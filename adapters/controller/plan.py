"""plan(): what the controller should do, decided from read models alone, with no I/O.

Nothing here is trusted blindly: every action is checked again against the
event log (claims, creates, reports) or the runtime's insert-if-absent table
before it has any effect. The plan only decides what is worth trying.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

ENDED = frozenset({"exited", "stopped", "deleted", "lost"})
REPORTS = frozenset({"record_created", "record_started", "record_exit", "record_lost"})
# How long a twin controller's share of the work is left to it while it lives (see Split).
TWIN_GRACE = timedelta(seconds=3)


def is_gone(row: Any) -> bool:
    """Ended AND its processes are gone: a stopped or deleted row counts only once ended_at is set."""
    if row.state in ("stopped", "deleted"):
        return getattr(row, "ended_at", None) is not None
    return row.state in ENDED


@dataclass(frozen=True)
class Split:
    """How twin controllers (of one claimant, on one home) split the work, as this one sees it.

    Each config belongs to the twin whose `rank` it hashes to among the `count` that run; a
    twin that dies stops counting, and its configs go to the others. A New deployment is
    claimed at once by its config's twin, by any once it has waited TWIN_GRACE (`overdue`).
    Reports about a deployer are made at once by its config's twin or by the process that
    created it (`created`: its deployers younger than TWIN_GRACE), by any once the deployer is
    older. Only an economy: twins do not race for the same appends, and nothing waits long.
    """

    rank: int = 0
    count: int = 1
    created: frozenset[str] = frozenset()
    overdue: frozenset[tuple[str, int]] = frozenset()

    def owns(self, config: str) -> bool:
        return self.count <= 1 or zlib.crc32(config.encode()) % self.count == self.rank

    def claims_now(self, config: str, version: int) -> bool:
        return self.owns(config) or (config, version) in self.overdue

    def reports_now(self, config: str, row: Any, now: datetime) -> bool:
        return self.owns(config) or row.name in self.created or not _younger(row.created_at, now, TWIN_GRACE)

    def creates_now(self, config: str, claimed_at: str | None, now: datetime) -> bool:
        """A claim of this claimant with no runtime row yet: its config's twin is creating it."""
        return self.owns(config) or claimed_at is None or not _younger(claimed_at, now, TWIN_GRACE)


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
    split: Split | None = None,
) -> list[Action]:
    """Actions for every open deployment row of the desired-deployers view.

    `observed` maps deployer names to runtime rows (objects with state,
    exit_code, reason, created_at). Deployments claimed by another controller
    are left to it, unless its lease has expired (`expired`): then they are Lost.

    `split` says which claims, creates and reports are this controller's while
    twin controllers run (see Split); None: all of them.
    """
    actions: list[Action] = []
    busy = {d["config"] for d in desired if d["phase"] != "New"}
    for d in desired:
        if d["phase"] == "New":
            if not d["cancel"] and d["config"] not in busy:
                if split is None or split.claims_now(d["config"], d["version"]):
                    actions.append(_act("claim", d))
                busy.add(d["config"])
        elif d["claimant"] == claimant:
            actions.extend(_active(d, observed.get(d["step"]) if d["step"] else None, now, split))
        elif d["claimant"] in expired:
            actions.append(_act("record_lost", d, name=d["step"], reason=f"claimant {d['claimant']} lease expired"))
    return actions


def _act(kind: str, d: Mapping[str, Any], **extra: Any) -> Action:
    return Action(kind, d["config"], d["version"], d["attempt"], **extra)


def _active(d: Mapping[str, Any], row: Any, now: datetime, split: Split | None) -> list[Action]:
    name = d["step"]
    if d["cancel"]:
        return _cancelling(d, row)
    if _expired(d, now):
        return [_act("timeout", d, name=name, reason=f"timeout: attempt exceeded {d['timeout']}s")]
    if name is None:
        return []
    if row is None:
        if d["created"] or (split is not None and not split.creates_now(d["config"], d["claimed_at"], now)):
            return []  # created before (never again), or a twin's claim that it is creating
        return [_act("create", d, name=name)]
    if split is not None and not split.reports_now(d["config"], row, now):
        return []  # a twin's: left to it for a moment
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


def _younger(stamp: str, now: datetime, age: timedelta) -> bool:
    """Whether `stamp` (ISO, with its offset) is less than `age` before now; a future one is not."""
    return timedelta(0) <= now - datetime.fromisoformat(stamp) < age


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
