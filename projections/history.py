"""Rollout history: configs, a row per deployment, and a row per deployer or hook run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..domain import phases
from . import freezes
from .history_tables import (
    COLUMNS,
    DURATION_BUCKETS,
    DURATIONS,
    FINISHED,
    KEYS,
    MEASUREMENTS,
    PHASE_COUNTS,
    SCHEMA,
    STEP_STATE,
    VERIFICATION_COUNTS,
    VERIFIED,
    ending_key,
    exact,
    measurement_row,
    spec_text,
)
from .projection import Fold, Projection, StatementSink
from .records import Record
from .rows import Table

if TYPE_CHECKING:
    import sqlite_utils

AUTO_ROLLBACK = "automatic rollback to"  # (domain.deployment.AUTO_ROLLBACK: the cause of one)


_STEP_MOVES = frozenset(
    {
        "DeployerClaimed",
        "DeployerSucceeded",
        "HookSucceeded",
        "HookFailed",
        "MeasurementRecorded",
        "PauseEnded",
        "Promoted",
    }
)
_VERIFYING = frozenset({"MeasurementRecorded", "RetryRequested"})  # the events that change a row's VERIFIED
_CONFIG_CHANGES = frozenset({"SpecChanged", "Paused", "Resumed", "RolloutTriggered"})
# Events whose row changes follow from their type and time alone: no next step, exit code nor reason
_NO_DATA = frozenset(
    {
        "DeployerCreated",
        "HookCreated",
        "DeployerStarted",
        "HookStarted",
        "CancelRequested",
        "Cancelled",
        "Paused",
        "Resumed",
        "Unfrozen",
    }
)


class History(Projection):
    name = "history"
    # 2: approvals and freezes; endings, and the deployments_phase index. 3: specs as compact JSON.
    # 4: a NaN or an infinity in a spec as the log holds it (orjson wrote null); a succeeded run's exit code 0.
    # 5: steps, measurements, pauses and automatic rollbacks (7.6). 6: phase_counts, verification_counts and
    # durations (/metrics read them from the deployments_phase index, a scan of deployments and of endings).
    # 7: the deployment number is `revision` in every table, as in the events (was `version`).
    # 8: finished (/metrics made from nothing summed every endings row by config).
    # 9: measurements, each with its template, value and error (7.9).
    version = 9
    tables = (
        "configs",
        "deployments",
        "steps",
        "endings",
        "freezes",
        "phase_counts",
        "verification_counts",
        "finished",
        "durations",
        "measurements",
    )

    def create(self, db: sqlite_utils.Database) -> None:
        for statement in SCHEMA:
            db.execute(statement)
        freezes.create(db)

    def fold(self, conn: StatementSink) -> HistoryFold:
        return HistoryFold(conn)


class HistoryFold(Fold):
    def __init__(self, conn: StatementSink) -> None:
        self.configs, self.deployments, self.steps, self.endings = (
            Table(conn, t, COLUMNS[t], KEYS[t]) for t in COLUMNS
        )
        self.freezes = freezes.FreezeTable(conn)
        self.phase_counts = Table(conn, "phase_counts", PHASE_COUNTS, "key")
        self.verification_counts = Table(conn, "verification_counts", VERIFICATION_COUNTS, "config")
        self.finished = Table(conn, "finished", FINISHED, "config")
        self.durations = Table(conn, "durations", DURATIONS, "key")
        self.measurements = Table(conn, "measurements", MEASUREMENTS, "name")
        # Changes to those counts since the last flush: (config, phase) -> deployments, config -> the four sums
        self.moved: dict[tuple[str, str], int] = {}
        self.verified: dict[str, list[int]] = {}
        self.ended: dict[float | None, list[int]] = {}  # le -> ends, exact seconds
        self.ends: dict[str, list[int]] = {}  # config -> ends complete, failed

    def _tables(self) -> tuple[Table, ...]:
        return (
            self.configs,
            self.deployments,
            self.steps,
            self.endings,
            self.phase_counts,
            self.verification_counts,
            self.finished,
            self.durations,
            self.measurements,
        )

    def from_zero(self) -> None:
        for table in self._tables():
            table.from_zero()

    def wants(self, kind: str, type_: str) -> bool:
        if freezes.wants(kind, type_):
            return True
        if kind == "freeze":
            return False
        return kind != "config" or type_ == "Registered" or type_ in _CONFIG_CHANGES

    def needs_data(self, kind: str, type_: str) -> bool:
        return type_ not in _NO_DATA

    def apply(self, records: Sequence[Record]) -> None:
        for r in records:
            if r.kind == "config" and r.type not in freezes.TYPES:
                self._config(r)
            elif r.kind == "deployment":
                self._deployment(r)
            elif freezes.wants(r.kind, r.type):
                self.freezes.apply(r)

    def flush(self) -> None:
        self._counted()
        for table in self._tables():
            table.flush()
        self.freezes.flush()

    def _count(self, row: dict[str, Any], sign: int) -> None:
        """Count deployment `row` in (sign 1) or out of (sign -1) its config's sums."""
        config = row["config"]
        self._move(config, row["phase"], sign)
        self._verify(config, [row[c] or 0 for c in VERIFIED] + [row["rollback_of"] is not None], sign)

    def _move(self, config: str, phase: str, n: int) -> None:
        key = (config, phase)
        self.moved[key] = self.moved.get(key, 0) + n

    def _verify(self, config: str, counts: list[int], sign: int) -> None:
        sums = self.verified.get(config)
        if sums is None:
            self.verified[config] = sums = [0, 0, 0, 0]
        for i, n in enumerate(counts):
            sums[i] += sign * n

    def _counted(self) -> None:
        """Add the changes to the sums since the last flush to their rows (a row for every sum changed,
        even by 0 in all: which rows exist follows from the events, not from where the batches end)."""
        phase_counts, verification_counts = self.phase_counts, self.verification_counts
        for (config, phase), n in self.moved.items():
            key = f"{config} {phase}"
            row = phase_counts.get(key) or {"key": key, "config": config, "phase": phase, "n": 0}
            row["n"] += n
            phase_counts.put(row)
        for config, sums in self.verified.items():
            row = verification_counts.get(config) or dict.fromkeys(VERIFICATION_COUNTS, 0) | {"config": config}
            for column, n in zip(VERIFICATION_COUNTS[1:], sums, strict=True):
                row[column] += n
            verification_counts.put(row)
        for config, (complete, failed) in self.ends.items():
            row = self.finished.get(config) or {"config": config, "complete": 0, "failed": 0}
            row.update(complete=row["complete"] + complete, failed=row["failed"] + failed)
            self.finished.put(row)
        for le, (n, summed) in self.ended.items():
            key = str(le)
            row = self.durations.get(key) or {"key": key, "le": le, "count": 0, "exact": "0"}
            row.update(count=row["count"] + n, exact=str(int(row["exact"]) + summed))
            self.durations.put(row)
        self.moved.clear()
        self.verified.clear()
        self.ends.clear()
        self.ended.clear()

    def _config(self, r: Record) -> None:
        if r.type == "Registered":
            self.configs.put(
                {
                    "stream": r.stream,
                    "name": r.data["name"],
                    "spec": spec_text(r.data["spec"], r.text),
                    "paused": 0,
                    "latest_revision": 0,
                    "created_at": r.timestamp,
                    "updated_at": r.timestamp,
                }
            )
            return
        if r.type not in _CONFIG_CHANGES:
            return
        row = self.configs.get(r.stream)
        if row is None:
            return
        if r.type == "SpecChanged":
            row["spec"] = spec_text(r.data["spec"], r.text)
        elif r.type == "RolloutTriggered":
            row["latest_revision"] = r.data["revision"]
        else:
            row["paused"] = int(r.type == "Paused")
        row["updated_at"] = r.timestamp
        self.configs.changed[r.stream] = row

    def _deployment(self, r: Record) -> None:
        type_, data = r.type, r.data
        if type_ == "Created":
            self._deployment_created(r)
            return
        deployments = self.deployments
        row = deployments.get(r.stream)
        if row is None:
            return
        self._step(row, r, type_, data)
        if type_ == "MeasurementRecorded":  # with what a template's measurement said (7.9)
            self.measurements.put(measurement_row(row, r.position, r.timestamp, data))
        before = row["phase"]
        row["phase"] = after = phases.phase_after(before, type_, data)
        if after != before:  # (inline: a rebuild moves ~400,000 deployments between phases per 1M events)
            moved, config = self.moved, row["config"]
            moved[config, before] = moved.get((config, before), 0) - 1
            moved[config, after] = moved.get((config, after), 0) + 1
        if type_ in _VERIFYING:
            was = [row[c] or 0 for c in VERIFIED]
            _progress(row, type_, data)
            self._verify(row["config"], [(row[c] or 0) - n for c, n in zip(VERIFIED, was, strict=True)] + [0], 1)
        else:
            _progress(row, type_, data)
        if type_ == "RetryRequested":
            row.update(attempt=data["attempt"], reason=None, started_at=None, finished_at=None)
            row.update(needs_approval=1 if data.get("needs_approval") else 0, approved_by=None)
        elif type_ == "Approved":
            row["approved_by"] = r.meta.get("actor")
        elif type_ == "DeployerStarted" and not row["started_at"]:
            row["started_at"] = r.timestamp
        if after in phases.TERMINAL and before not in phases.TERMINAL:
            row["finished_at"] = r.timestamp
            self._ended(row, after, r.timestamp)
            row["paused"] = None
            if after == phases.FAILED:
                row["reason"] = "cancelled" if type_ in ("Cancelled", "CancelRequested") else data.get("reason")
        deployments.changed[r.stream] = row

    def _deployment_created(self, r: Record) -> None:
        """A deployment's first row (and its count by phase), from its Created event."""
        data = r.data
        replaced = self.deployments.get(r.stream)
        if replaced is not None:  # a second Created of one stream (no log the domain writes has one)
            self._count(replaced, -1)
        self._count_new(
            {
                "stream": r.stream,
                "config": data["config"],
                "revision": data["revision"],
                "phase": phases.NEW,
                "reason": None,
                "attempt": 1,
                "cause": data["cause"],
                "message": data["message"],
                "actor": r.meta.get("actor"),
                "step": None,
                "created_at": r.timestamp,
                "started_at": None,
                "finished_at": None,
                "spec": spec_text(data["spec"], r.text),
                "needs_approval": 1 if data["spec"].get("require_approval") else 0,
                "approved_by": None,
                "step_index": None,
                "step_count": len(data["spec"].get("steps") or [100]),
                "weight": None,
                "paused": None,
                "passed": 0,
                "failed": 0,
                "inconclusive": 0,
                # the failed revision is the config's latest when its rollback is triggered, in that save
                "rollback_of": data["revision"] - 1 if data["cause"].startswith(AUTO_ROLLBACK) else None,
            }
        )

    def _count_new(self, row: dict[str, Any]) -> None:
        self.deployments.put(row)
        self._count(row, 1)

    def _ended(self, deployment: dict[str, Any], phase: str, at: str) -> None:
        """Count this end of `deployment` by config, outcome and duration bucket."""
        seconds = max(
            0.0, (datetime.fromisoformat(at) - datetime.fromisoformat(deployment["created_at"])).total_seconds()
        )
        le = next((bound for bound in DURATION_BUCKETS if seconds <= bound), None)
        outcome = "complete" if phase == phases.COMPLETE else "failed"
        key = ending_key(deployment["config"], outcome, le)
        row = self.endings.get(key) or {
            "key": key,
            "config": deployment["config"],
            "outcome": outcome,
            "le": le,
            "count": 0,
            "seconds": 0.0,
        }
        before = row["seconds"]
        row.update(count=row["count"] + 1, seconds=before + seconds)
        self.endings.put(row)
        ends = self.ends.get(deployment["config"])
        if ends is None:
            self.ends[deployment["config"]] = ends = [0, 0]
        ends[outcome != "complete"] += 1
        ended = self.ended.get(le)
        if ended is None:
            self.ended[le] = ended = [0, 0]
        ended[0] += 1
        ended[1] += exact(row["seconds"]) - exact(before)

    def _step(self, deployment: dict[str, Any], r: Record, type_: str, data: dict[str, Any]) -> None:
        """Follow the deployer and hook runs of the current attempt."""
        state = data.get("outcome") if type_ == "MeasurementRecorded" else STEP_STATE.get(type_)
        if state is not None and deployment["step"]:
            current = self.steps.get(deployment["step"])
            if current is not None:
                current["state"] = state
                if state == "running":
                    current["started_at"] = r.timestamp
                elif state != "created":
                    # a run succeeds when it exits 0 (Deployment.report_exited): its event has no exit code
                    code = 0 if state == "succeeded" else data.get("exit_code")
                    current.update(finished_at=r.timestamp, exit_code=code)
                    current["reason"] = data.get("reason")
                self.steps.changed[current["name"]] = current
        nxt = data.get("step") if type_ == "DeployerClaimed" else data.get("next")
        if type_ in _STEP_MOVES:
            deployment["step"] = nxt and nxt["name"]
        if state is not None and state not in ("created", "running") and not nxt:
            deployment["step"] = None
        if nxt:
            self.steps.put(
                {
                    "name": nxt["name"],
                    "config": deployment["config"],
                    "revision": deployment["revision"],
                    "attempt": data["attempt"],
                    "kind": nxt["kind"],
                    "try": nxt["try"],
                    "state": "paused" if nxt["kind"] == "pause" else "waiting",
                    "exit_code": None,
                    "reason": None,
                    "created_at": r.timestamp,
                    "started_at": None,
                    "finished_at": None,
                }
            )


def _progress(row: dict[str, Any], type_: str, data: dict[str, Any]) -> None:
    """Follow an attempt's rollout step, weight, pause and measurements (7.6)."""
    nxt = data.get("step") if type_ == "DeployerClaimed" else data.get("next")
    if nxt and nxt.get("kind") == "deployer":
        weights = (json.loads(row["spec"]).get("steps") if '"steps"' in row["spec"] else None) or [100]
        index = int(nxt.get("index", 1))
        row.update(step_index=index, weight=weights[min(index, len(weights)) - 1])
    if type_ == "StepPaused":
        row["paused"] = data.get("why")
    elif type_ in ("PauseEnded", "Promoted"):
        row["paused"] = None
    elif type_ == "MeasurementRecorded" and data.get("outcome") in ("passed", "failed", "inconclusive"):
        row[data["outcome"]] = (row[data["outcome"]] or 0) + 1
    elif type_ == "RetryRequested":
        row.update(step_index=None, weight=None, paused=None, passed=0, failed=0, inconclusive=0)
