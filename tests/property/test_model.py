"""The model test (DESIGN section 8): a hypothesis state machine over the real application.

The real RolloutsApp on a temporary SQLite store, the real projections, two
real Controller objects (each with its own ProjectionStore object on the
same folder, one claimant, one runtime) and a simulated runtime
(sim_runtime.SimRuntime: LocalRuntime's interface, no processes). Rules
drive every user command, controller passes (on the live store, on a view
lagging behind the log, on the projections frozen or an old copy; or late),
deployer lifecycles, stale and duplicated reports, projection rebuilds,
snapshots, restores, deletions and another log's projections put in their
place, and faults inside the controller's calls (a crash, a twin controller or
a user command between its steps) or just before a save of the controller or
of a user command (a racing writer: the save conflicts and is decided again).
After every step:

- I1: the simulation spawned each deployer name at most once; create() is called
  only for a step the log has claimed; the log records a creation only for a
  deployer that was spawned; the audit finds no I1.
- I2: at most one deployer per config was ever alive at once in the simulation;
  a live deployer is the current step of an active deployment in the log; the
  audit finds no I2.
- I3: the audit (domain.audit over the audit view, as `rollouts audit` does).
- I9, I10: the step audit (domain.step_audit) finds no deployment Complete without each step's deployer
  and verification passed (or promoted past), no step started early, and exactly one automatic rollback
  for each failure that calls for one; configs have steps, measurements (the simulation's processes,
  whose exits are their outcomes), pauses, and `promote` and `abort` are rules like the other commands.
- G1, G2: the gate audit (domain.gate_audit) finds no claim made inside a freeze, or of an attempt
  that needed an approval and had none; freezes (by name, of all), unfreezes and approvals (by the
  actor who asked, or another) are rules like the other commands.
- I4/I6: each command's outcome matches a model decided from the read models, on
  the state a racing write left if one ran just before its save (refused commands
  append nothing); each acknowledged command is in the log.
- I5: a projection store caught up step by step, through a source that delivers
  old notifications again, equals a replay from zero (every few steps and at the
  end); so do the live stores, caught up (once mid-run and at the end).

ROLLOUTS_MODEL_EXAMPLES (default 500) and ROLLOUTS_MODEL_STEPS (default 30) size the run.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from sim_runtime import ACTIVE, SimCrash, SimRuntime

import rollouts.adapters.controller.loop as loop_module
from rollouts.adapters.controller.loop import Controller
from rollouts.adapters.home import Home
from rollouts.adapters.service import commands, promotion
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import open_app
from rollouts.adapters.store.reader import RecorderSource
from rollouts.domain import approval, phases, stage
from rollouts.domain.audit import audit
from rollouts.domain.audit_rules import audit_rules
from rollouts.domain.config import DeploymentConfig
from rollouts.domain.errors import DomainError, NotFound
from rollouts.domain.freeze import ALL_ID, in_force
from rollouts.domain.spec import Hook, Spec
from rollouts.projections import audit_queries, files
from rollouts.projections.projection import Projection
from rollouts.projections.records import Record, decode
from rollouts.projections.store import ALL, BY_NAME, ProjectionStore, projections_named

EXAMPLES = int(os.environ.get("ROLLOUTS_MODEL_EXAMPLES", "500"))
STEPS = int(os.environ.get("ROLLOUTS_MODEL_STEPS", "30"))
REPLAY_EVERY = 10  # steps between comparisons of the step-by-step store with a replay from zero (and at teardown)
LIVE_CHECK_EVERY = 20  # steps between comparisons of the live stores with a replay (and at teardown)
CLAIMANT = "claimant-model"
USER = "alice@model"  # who runs every user command but approvals
APPROVERS = (USER, "bob@model")
FREEZE_UNTIL = (None, timedelta(hours=1))  # until unfreeze, or past the real clock's reach in a run (not LATE's)
NAMES = ("a", "b", "c")
STAGE = "s"  # a stage (7.10) that takes its artifact (IMAGE) from "a": created at the start, with a policy drawn
ARTIFACT = "IMAGE"
LATE = timedelta(days=2)  # a pass this late is past every timeout the specs use
POLICIES = ("abort", "retry", "ignore")
PROJECTIONS = tuple(p.name for p in ALL)
DESIRED = BY_NAME["desired"]
DELETABLE = ("created", "running", "exited", "stopped", "lost")
REPORTS = ("duplicate", "stale exited", "stale lost", "stale started", "stale created")
DEPLOYER_EVENTS = ("starts", "exits 0", "exits 1", "exits 127", "killed", "deleted", "vanishes")
AUDIT_SQL = (  # adapters/cli/audit_cmds.py
    "SELECT position, type, config, revision, data FROM events WHERE stream IN "
    "(SELECT stream FROM streams WHERE kind = 'deployment') ORDER BY position"
)
CREATED_SQL = "SELECT data FROM events WHERE type IN ('DeployerCreated', 'HookCreated', 'MeasurementCreated')"


def _tmp_base() -> str | None:
    """tmpfs when there is one: the event store fsyncs every commit."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


# -- helpers --------------------------------------------------------------------


class Redelivering:
    """An event source that delivers the last few notifications again with every read (I5)."""

    def __init__(self, inner: RecorderSource, again: int = 3) -> None:
        self.inner = inner
        self.again = again

    def head(self) -> int:
        return self.inner.head()

    def identity(self) -> str:
        return self.inner.identity()

    def read(self, after: int, limit: int) -> Sequence[Any]:
        return self.inner.read(max(0, after - self.again), limit + self.again)


class Replay:
    """I5's reference: every projection folded from position zero into a fresh in-memory database."""

    def __init__(self, source: RecorderSource) -> None:
        self.source = source
        self.records: list[Record] = []

    def until(self, position: int) -> list[Record]:
        """The log's records up to `position`, decoded once."""
        head = self.source.head()
        after = self.records[-1].position if self.records else 0
        if head > after:
            self.records += [decode(n) for n in self.source.read(after, head - after)]
        return [r for r in self.records if r.position <= position]

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        head = self.source.head()
        self.until(head)
        tables = {}
        for p in ALL:
            db = sqlite_utils.Database(memory=True)
            db.execute(files.TRACKING)
            p.create(db)
            p.apply(db, self.records)
            files.track(db, p.name, files.Tracked(p.version, head, self.source.identity() if head else ""))
            tables.update(dump_db(db, p))
            db.conn.close()
        return tables


class BackInTime:
    """Read models gone back in time: `desired` as it was at an earlier log position, never caught up."""

    def __init__(self, records: Sequence[Record]) -> None:
        self.desired = sqlite_utils.Database(memory=True)
        DESIRED.create(self.desired)
        DESIRED.apply(self.desired, records)

    def catch_up(self, projections: Sequence[Projection] = ALL) -> None:
        pass

    def db(self, name: str) -> sqlite_utils.Database:
        assert name == "desired", name  # all the controller reads
        return self.desired

    def query(self, name: str, sql: str, params: Sequence[object] = ()) -> list[dict[str, object]]:
        return list(self.db(name).query(sql, params))


def close_store(store: ProjectionStore | BackInTime) -> None:
    """Close every connection a store holds (before its files are copied or replaced)."""
    if isinstance(store, BackInTime):
        store.desired.close()
    else:
        store.close()


def dump(store: ProjectionStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of every projection, tracking included, as sorted rows."""
    tables = {}
    for p in ALL:
        tables.update(dump_db(store.db(p.name), p))
    return tables


def dump_db(db: sqlite_utils.Database, p: Projection) -> dict[str, list[tuple[Any, ...]]]:
    # The first column of every projection table is its primary key.
    return {f"{p.name}.{t}": db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in (*p.tables, "tracking")}


def open_files(folder: Path) -> list[str]:
    """Files under `folder` this process still has open (a connection a store let go of, not closed)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(f"{folder}/"):
            found.append(target)
    return found


def differences(left: dict[str, list[Any]], right: dict[str, list[Any]]) -> str:
    lines = []
    for table in sorted(set(left) | set(right)):
        a, b = set(left.get(table, [])), set(right.get(table, []))
        if a != b:
            lines.append(f"{table}: only left {sorted(a - b, key=repr)}; only right {sorted(b - a, key=repr)}")
    return "\n".join(lines)


@contextmanager
def clock(offset: timedelta | None) -> Iterator[None]:
    """Make the controller's `now` later by `offset` (a pass after every timeout)."""
    if offset is None:
        yield
        return
    real = loop_module.datetime

    class Late(real):  # type: ignore[misc, valid-type]
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return real.now(tz) + offset

    loop_module.datetime = Late  # type: ignore[misc]
    try:
        yield
    finally:
        loop_module.datetime = real  # type: ignore[misc]


def hooks(which: str, name: str) -> st.SearchStrategy[Hook | None]:
    return st.none() | st.builds(Hook, command=st.just([f"{which}-hook", name]), policy=st.sampled_from(POLICIES))


def specs(name: str) -> st.SearchStrategy[Spec]:
    return st.builds(
        Spec,
        command=st.just(["deploy", name]),
        env=st.just({ARTIFACT: f"{name}:0"}),
        timeout=st.sampled_from([60, 600]),
        history_limit=st.integers(1, 3),
        trigger=st.sampled_from(["manual", "config-change"]),
        pre_hook=hooks("pre", name),
        post_hook=hooks("post", name),
        require_approval=st.booleans(),
        steps=st.sampled_from([None, None, [50, 100], [10, 50, 100]]),
        step_pause=st.sampled_from([0, 0, 30, "manual"]),
        verify=st.sampled_from([None, ["verify", name], ["verify", name]]),
        verify_count=st.sampled_from([1, 2]),
        verify_interval=st.sampled_from([0, 0, 5]),
        inconclusive_limit=st.sampled_from([0, 1]),
        auto_rollback=st.sampled_from([False, True, True]),
    )


def stage_specs() -> st.SearchStrategy[Spec]:
    """Stage `s` of `a`: soaked for nothing or for longer than a run, promoted by hand or by the controller."""
    return st.builds(
        Spec,
        command=st.just(["deploy", STAGE]),
        upstream=st.just("a"),
        artifact=st.just([ARTIFACT]),
        soak=st.sampled_from([0, 0, 3600]),
        promote=st.sampled_from(["manual", "auto", "auto"]),
        require_approval=st.booleans(),
        verify=st.sampled_from([None, ["verify", STAGE]]),
        verify_count=st.just(1),
        auto_rollback=st.booleans(),
    )


Model = Callable[[], tuple[str | None, Callable[[Any], None]]]


@dataclass
class Running:
    """A user command in progress: its model, what the model expected before it ran (and, if a racing
    write ran just before its save, after that race), and the log's head before it (or the race)."""

    model: Model
    pre: tuple[str | None, Callable[[Any], None]]
    before: int
    post: tuple[str | None, Callable[[Any], None]] | None = None

    @property
    def decided(self) -> tuple[str | None, Callable[[Any], None]]:
        """The model a write or a refusal answers to: after the race, if one ran (a conflict made the
        command decide again, on fresh state)."""
        return self.post or self.pre


@dataclass
class Facts:
    """What the read models (caught up) say of one config: the model commands are decided on."""

    exists: bool = False
    paused: bool = False
    latest: int = 0
    spec: dict[str, Any] = field(default_factory=dict)
    phases: dict[int, str] = field(default_factory=dict)
    attempts: dict[int, int] = field(default_factory=dict)
    pauses: dict[int, str | None] = field(default_factory=dict)  # why each deployment waits in a pause

    @property
    def open(self) -> list[int]:
        return [v for v, p in sorted(self.phases.items()) if p in phases.OPEN]


SPEC_CHANGES = (
    "env",
    "command",
    "pre_hook",
    "post_hook",
    "pre_policy",
    "post_policy",
    "history_limit",
    "trigger",
    "timeout",
    "approval",
    "steps",
    "verify",
    "auto_rollback",
    "nothing",
    "create",
)


def change_spec(spec: Spec, change: str, name: str, serial: int, policy: str, limit: int) -> Spec:
    data = spec.to_data()
    if change == "env":  # a new artifact too, for the stage that takes a's
        data["env"] = {**data["env"], "REV": str(serial), ARTIFACT: f"{name}:{serial}"}
    elif change == "command":
        data["command"] = ["deploy", name, str(serial)]
    elif change in ("pre_hook", "post_hook"):
        which = change.split("_")[0]
        data[change] = None if data[change] else {"command": [f"{which}-hook", name], "policy": policy}
    elif change in ("pre_policy", "post_policy"):
        hook = f"{change.split('_')[0]}_hook"
        if data[hook]:
            data[hook] = {**data[hook], "policy": policy}
    elif change == "history_limit":
        data["history_limit"] = limit
    elif change == "trigger":
        data["trigger"] = "manual" if data["trigger"] == "config-change" else "config-change"
    elif change == "timeout":
        data["timeout"] = 60 if data["timeout"] == 600 else 600
    elif change == "approval":
        data["require_approval"] = not data.get("require_approval", False)
    elif change == "steps":
        data["steps"] = None if data.get("steps") else [50, 100]
    elif change == "verify":
        data["verify"] = None if data.get("verify") else ["verify", name, str(serial)]
    elif change == "auto_rollback":
        data["auto_rollback"] = not data.get("auto_rollback", False)
    return Spec.model_validate(data)


# -- the state machine ------------------------------------------------------------


class RolloutModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="rollouts-model-", dir=_tmp_base()))
        self.home = Home(self.root / "home")
        self.app = open_app(self.home, None)
        self.source = RecorderSource(self.app.recorder)
        self.events = sqlite3.connect(self.home.events_db, isolation_level=None)
        self.runtime = SimRuntime(self.root / "logs")
        self.controllers = [
            Controller(self.app, None, self.runtime, CLAIMANT, f"controller-{i}@model", str(self.root))
            for i in range(2)
        ]
        self.stores: list[ProjectionStore] = []
        self._open_stores()
        self.checker = ProjectionStore(self.root / "checker", Redelivering(self.source))
        self.checker_at = -1
        self.seen = (-1, -1)
        self.expected: dict[str, list[tuple[Any, ...]]] = {}
        self.expected_at = -1
        self.replay = Replay(self.source)
        self.snapshots: list[Path] = []
        self.acked: dict[str, str] = {}  # correlation id -> what the command answered
        self.steps = 0
        self.serial = 0
        self.pass_depth = 0
        self.commands: list[Running] = []  # user commands in progress (a fault may run one inside another)
        self.racing = False
        self.save_faults: list[Callable[[str | None, str], None]] = []
        self.command_races: list[Callable[[str | None, str], None]] = []
        self.runtime.vet = self._vet_create
        self._real_save = self.app.save
        self.app.save = self._save  # instance attribute: the racing-write fault point

    # -- plumbing ----------------------------------------------------------------

    def _scratch(self, what: str) -> Path:
        self.serial += 1
        return self.root / f"{what}-{self.serial}"

    def _open_stores(self) -> None:
        self.stores = [ProjectionStore(self.home.projections, self.source) for _ in self.controllers]
        for controller, store in zip(self.controllers, self.stores, strict=True):
            controller.projections = store

    def _close_stores(self) -> None:
        """Close every connection to the live folder: ours, and those the store left to the GC.

        (A sqlite3 connection is in a reference cycle with its statement cache: one the store drops
        without closing stays open until the cyclic GC runs. Closing it later, after its files were
        replaced, would unlink the WAL of the new file of the same name.)
        """
        for store in self.stores:
            close_store(store)
        self._released()

    def _released(self) -> None:
        """Collect the connections to the live folder that a store dropped without closing."""
        if not Path("/proc/self/fd").is_dir():
            gc.collect()
            return
        for generation in (0, 1, 2):
            if not open_files(self.home.projections):
                break
            gc.collect(generation)
        assert not open_files(self.home.projections), open_files(self.home.projections)

    def head(self) -> int:
        """The log's head, read on a connection of our own (the recorder's costs a transaction)."""
        return self.events.execute(self.app.recorder.select_max_notification_id_statement).fetchone()[0] or 0

    def _vet_create(self, name: str) -> None:
        """DESIGN 5: a create happens only for a committed claim (of that very step)."""
        self._catch_up_checker()
        claimed = self.checker.db("history").execute("SELECT 1 FROM steps WHERE name = ?", (name,)).fetchone()
        assert claimed, f"I1: create({name}) called with no committed claim of that step in the log"

    def _catch_up_checker(self) -> None:
        """The step-by-step store follows the log (only it writes its folder: skip when at the head)."""
        head = self.head()
        if head != self.checker_at:
            self.checker.catch_up()
            self.checker_at = head

    def _save(self, *aggregates: Any, **kwargs: Any) -> Any:
        """The app's save; an armed fault runs just before it (a racing writer): before a controller's
        save, or before a user command's (whose model is then asked again)."""
        config = next((a.name for a in aggregates if isinstance(a, DeploymentConfig)), None)
        if config is not None and not self.racing:
            if self.command_races and len(self.commands) == 1:
                self._race(self.command_races.pop(0), config)
                running = self.commands[-1]
                running.post, running.before = running.model(), self.head()
            elif self.save_faults and self.pass_depth and not self.commands:
                self._race(self.save_faults.pop(0), config)
        return self._real_save(*aggregates, **kwargs)

    def _race(self, fault: Callable[[str | None, str], None], config: str) -> None:
        self.racing = True
        try:
            fault(None, config)
        finally:
            self.racing = False

    def _facts(self, name: str) -> Facts:
        self._catch_up_checker()
        db = self.checker.db("history")
        row = db.execute("SELECT spec, paused, latest_revision FROM configs WHERE name = ?", (name,)).fetchone()
        if row is None:
            return Facts()
        deployments = db.execute("SELECT revision, phase, attempt, paused FROM deployments WHERE config = ?", (name,))
        facts = Facts(True, bool(row[1]), row[2], json.loads(row[0]))
        for revision, phase, attempt, paused in deployments.fetchall():
            facts.phases[revision] = phase
            facts.attempts[revision] = attempt
            facts.pauses[revision] = paused
        return facts

    def _deployment(self, name: str, revision: int) -> dict[str, Any]:
        self._catch_up_checker()
        db = self.checker.db("history")
        cursor = db.execute("SELECT * FROM deployments WHERE config = ? AND revision = ?", (name, revision))
        row = cursor.fetchone()
        assert row is not None, f"{name} v{revision} is not in the log"
        return dict(zip([c[0] for c in cursor.description], row, strict=True))

    def _desired(self) -> list[dict[str, Any]]:
        self._catch_up_checker()
        cursor = self.checker.db("desired").execute("SELECT * FROM open_deployments")
        columns = [c[0] for c in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    def _cancelled_or_failed(self, name: str, revision: int) -> bool:
        rows = [r for r in self._desired() if r["config"] == name and r["revision"] == revision]
        return bool(rows) and (rows[0]["phase"] == phases.FAILED or rows[0]["cancel"] == 1)

    def _command(self, what: str, model: Model, call: Callable[[dict[str, Any]], Any]) -> Any:
        """Run a user command against `model`: () -> (expected outcome, check of a success).

        Expected: None (succeeds), 'idempotent' (succeeds, may append nothing), 'refused', 'notfound',
        'unchanged' (config set with nothing to change). A racing write armed for commands runs just
        before the command's save, and the model is asked again on the state it left: a command that
        writes or is refused must answer to that state (it lost the race, so it decided again: I4);
        one that wrote nothing may answer to either (it read before the race).
        """
        meta = new_meta(USER)
        running = Running(model, model(), self.head())
        self.commands.append(running)
        try:
            result = call(meta)
        except SimCrash:
            assert self.head() == running.before, f"{what}: crashed before its save, yet appended events"
            return None  # the command's process died before committing: nothing acknowledged
        except (NotFound, DomainError) as error:
            assert self.head() == running.before, f"{what}: refused but appended events"
            expect, outcome = running.decided[0], "notfound" if isinstance(error, NotFound) else "refused"
            assert expect == outcome, f"{what}: {outcome} ({error}), the model expected {expect or 'success'}"
            return None
        finally:
            self.commands.pop()
        if self.head() > running.before:
            expect, check = running.decided
            assert expect in (None, "idempotent"), f"{what}: answered {result!r}, the model expected {expect}"
            self.acked[meta["correlation_id"]] = f"{what} -> {result!r}"
            check(result)
            return result
        models = [m for m in (running.post, running.pre) if m and m[0] in ("idempotent", "unchanged", "skipped")]
        expected = [m[0] for m in (running.pre, running.post) if m]
        assert models, f"{what}: answered {result!r} but appended nothing (I6), the model expected {expected}"
        expect, check = models[0]
        if expect == "unchanged":
            assert result == (False, None), result
        else:
            check(result)
        return result

    def _pass(self, which: int, view: str = "live", late: bool = False, data: st.DataObject | None = None) -> None:
        """One reconcile pass of controller `which`, on its live store or on stale read models:

        - frozen: served as they are on disk, never caught up (ROLLOUTS_FREEZE_PROJECTIONS);
        - snapshot: an earlier copy of the projections folder, frozen;
        - back_in_time: `desired` as it was at an earlier position of the log (`view lag` events ago).

        `late`: the pass happens after every open attempt's timeout.
        """
        controller = self.controllers[which]
        live = controller.projections
        stale: ProjectionStore | BackInTime | None = None
        if view == "frozen":
            stale = ProjectionStore(self.home.projections, self.source, frozen=True)
        elif view == "snapshot":
            folder = self._scratch("frozen")
            if self.snapshots and data is not None:
                shutil.copytree(data.draw(st.sampled_from(self.snapshots), label="snapshot"), folder)
            stale = ProjectionStore(folder, self.source, frozen=True)
        elif view == "back_in_time":
            head = self.head()
            lag = st.integers(0, min(head, 8)) | st.integers(0, head)  # mostly a little behind, any lag at all
            stale = BackInTime(self.replay.until(head - data.draw(lag, label="view lag") if data else 0))
        if stale is not None:
            controller.projections = stale
        self.pass_depth += 1
        try:
            with clock(LATE if late else None):
                controller.reconcile()
        except SimCrash:
            pass  # the controller 'crashed' mid-pass; a later pass picks up from the log
        finally:
            self.pass_depth -= 1
            controller.projections = live
            if stale is not None:
                close_store(stale)

    # -- user commands ---------------------------------------------------------------

    @initialize(a=specs("a"), b=specs("b"), s=stage_specs())
    def create_configs(self, a: Spec, b: Spec, s: Spec | None = None) -> None:
        self._create_config("a", a)
        self._create_config("b", b)
        if s is not None:
            self._create_config(STAGE, s)

    def _create_config(self, name: str, spec: Spec) -> None:
        def model() -> tuple[str | None, Callable[[Any], None]]:
            exists = self._facts(name).exists

            def check(revision: int | None) -> None:
                facts = self._facts(name)
                assert facts.exists and facts.spec == spec.to_data()
                expected = {1: phases.NEW} if spec.trigger == "config-change" else {}
                assert (revision, facts.phases) == (1 if expected else None, expected)

            return "refused" if exists else None, check

        self._command(f"config create {name}", model, lambda meta: self.app.create_config(name, spec, meta))

    @rule(name=st.sampled_from(NAMES), supersede=st.booleans())
    def latest(self, name: str, supersede: bool) -> None:
        self._latest(name, supersede)

    def _latest(self, name: str, supersede: bool) -> None:
        self.serial += 1
        message = f"release {self.serial}"

        def model() -> tuple[str | None, Callable[[Any], None]]:
            facts = self._facts(name)
            refused = facts.paused or (facts.open and not supersede)

            def check(revision: int) -> None:
                assert revision == facts.latest + 1 == self._facts(name).latest
                row = self._deployment(name, revision)
                assert (row["cause"], row["message"]) == ("manual", message), row
                assert all(self._cancelled_or_failed(name, v) for v in facts.open), facts.open

            return "notfound" if not facts.exists else "refused" if refused else None, check

        command = f"rollout latest {name}" + (" --supersede" if supersede else "")
        self._command(command, model, lambda meta: self.app.latest(name, message, supersede, meta))

    def _promotable(self, name: str) -> int | None:
        """The newest upstream revision stage `name` may take now (7.10), by the log's fold of its events."""
        policy = stage.policy_of(self._facts(name).spec)
        assert policy is not None
        db = self.checker.db("audit")

        def load(revision: int) -> stage.UpstreamRevision:
            only = audit_queries.EventFilter(config=policy.upstream, revision=revision)
            found = (
                (e["type"], datetime.fromisoformat(e["timestamp"]), e["data"]) for e in audit_queries.events(db, only)
            )
            return stage.fold_upstream(policy.upstream, revision, found)

        found, _ = stage.newest_eligible(load, self._facts(policy.upstream).latest, policy, datetime.now(UTC))
        return None if found is None else found.revision

    @rule(name=st.sampled_from((*NAMES, STAGE)), queue=st.booleans())
    def latest_queued_or_promoted(self, name: str, queue: bool) -> None:
        """`rollout latest NAME --queue` (7.10), and of the stage with or without it (a promotion)."""
        queue = queue or name != STAGE  # (without --queue, a config that is no stage: the `latest` rule)
        self.serial += 1
        message = f"release {self.serial}"

        def model() -> tuple[str | None, Callable[[Any], None]]:
            facts = self._facts(name)
            if not facts.exists:
                return "notfound", lambda _: None
            chosen = self._promotable(name) if name == STAGE else None
            refused = facts.paused or (facts.open and not queue) or (name == STAGE and chosen is None)
            oldest = facts.open[0] if facts.open else None
            waiting = [v for v in facts.open if v != oldest and facts.phases[v] == phases.NEW]
            going = [v for v in facts.open if v not in waiting and not self._cancelled_or_failed(name, v)]

            def check(revision: int) -> None:
                assert revision == facts.latest + 1 == self._facts(name).latest
                row = self._deployment(name, revision)
                cause = "manual" if name != STAGE else f"promotion of a revision {chosen}"
                assert (row["cause"], row["message"]) == (cause, message), row
                for v in waiting:  # at most one waits: the one before is superseded
                    assert self._deployment(name, v)["reason"] == f"superseded by {revision}"
                assert not any(self._cancelled_or_failed(name, v) for v in going), going  # no cancel: they go on

            return "refused" if refused else None, check

        command = f"rollout latest {name}" + (" --queue" if queue else "")
        self._command(command, model, lambda meta: promotion.latest(self.app, name, message, meta, queue=queue))

    @rule(name=st.sampled_from(NAMES))
    def cancel(self, name: str) -> None:
        self._cancel(name)

    def _cancel(self, name: str) -> None:
        def model() -> tuple[str | None, Callable[[Any], None]]:
            facts = self._facts(name)
            expect = "notfound" if not facts.exists else None if facts.open else "refused"
            if expect is None and all(self._cancelled_or_failed(name, v) for v in facts.open):
                expect = "idempotent"  # every open one was asked to cancel already: nothing to append

            def check(revisions: list[int]) -> None:
                assert sorted(revisions) == facts.open
                assert all(self._cancelled_or_failed(name, v) for v in revisions), revisions

            return expect, check

        self._command(f"rollout cancel {name}", model, lambda meta: self.app.cancel(name, meta))

    @rule(name=st.sampled_from(NAMES), full=st.booleans(), approver=st.sampled_from(APPROVERS))
    def promote(self, name: str, full: bool, approver: str) -> None:
        def model() -> tuple[str | None, Callable[[Any], None]]:
            facts = self._facts(name)
            paused = [v for v in facts.open if facts.pauses.get(v) and facts.phases[v] in phases.ACTIVE]
            expect = "notfound" if not facts.exists else None if paused else "refused"

            def check(result: tuple[int, str]) -> None:
                assert result[0] == paused[-1], (result, paused)

            return expect, check

        def call(meta: dict[str, Any]) -> Any:
            return self.app.promote(name, full, {**meta, "actor": approver})

        self._command(f"rollout promote {name}{' --full' if full else ''}", model, call)

    @rule(name=st.sampled_from(NAMES))
    def abort(self, name: str) -> None:
        def model() -> tuple[str | None, Callable[[Any], None]]:
            facts = self._facts(name)
            opened = facts.open
            if not facts.exists:
                expect = "notfound"
            elif not opened or self._cancelled_or_failed(name, opened[-1]):
                expect = "refused"  # nothing open, or the latest is being cancelled or aborted already
            else:
                expect = None

            def check(revision: int) -> None:
                assert revision == opened[-1]
                assert self._cancelled_or_failed(name, revision)

            return expect, check

        self._command(f"rollout abort {name}", model, lambda meta: self.app.abort(name, "model", meta))

    @rule(name=st.sampled_from(NAMES))
    def retry(self, name: str) -> None:
        self._retry(name)

    def _retry(self, name: str) -> None:
        def model() -> tuple[str | None, Callable[[Any], None]]:
            facts = self._facts(name)
            if not facts.exists or facts.latest == 0:
                expect = "notfound"
            else:
                expect = None if facts.phases[facts.latest] == phases.FAILED else "refused"

            def check(result: tuple[int, int]) -> None:
                attempt = facts.attempts.get(facts.latest, 0) + 1
                assert result == (facts.latest, attempt)
                row = self._deployment(name, facts.latest)
                assert (row["phase"], row["attempt"]) == (phases.NEW, attempt), row

            return expect, check

        self._command(f"rollout retry {name}", model, lambda meta: self.app.retry(name, meta))

    @rule(name=st.sampled_from(NAMES), to=st.none() | st.integers(0, 5))
    def undo(self, name: str, to: int | None) -> None:
        def model() -> tuple[str | None, Callable[[Any], None]]:
            facts = self._facts(name)
            source = to
            if not facts.exists or (to is not None and not 1 <= to <= facts.latest):
                expect = "notfound"
            else:
                if source is None:
                    complete = [v for v, p in facts.phases.items() if p == phases.COMPLETE and v < facts.latest]
                    source = max(complete, default=None)
                expect = "refused" if source is None or facts.paused or facts.open else None
                if expect is None and self._restores_nothing(name, facts, source):
                    expect = "idempotent"  # the spec is the source's already: skipped, nothing appended (7.11)

            def check(result: tuple[int | None, int]) -> None:
                origin = Spec.model_validate(json.loads(self._deployment(name, result[1])["spec"]))
                assert Spec.model_validate(self._facts(name).spec).rollout_part() == origin.rollout_part()
                if result[0] is None:  # the spec was the source's already: skipped, nothing appended (7.11)
                    assert result[1] == source and self._facts(name).latest == facts.latest
                    return
                assert result == (facts.latest + 1, source)
                row = self._deployment(name, facts.latest + 1)
                assert row["cause"] == f"rollback to {source}", row

            return expect, check

        command = f"rollout undo {name}" + (f" --to-revision {to}" if to is not None else "")
        self._command(command, model, lambda meta: self.app.undo(name, to, meta))

    def _restores_nothing(self, name: str, facts: Facts, source: int | None) -> bool:
        """Whether an undo to `source` would restore the spec the config has (an automatic rollback's source:
        the revision it restored, as DecidingApp.spec_source follows it)."""
        while source is not None:
            row = self._deployment(name, source)
            restored = str(row["cause"]).removeprefix("automatic rollback to ")
            if restored == row["cause"] or not restored.isdigit() or int(restored) >= source:
                break
            source = int(restored)
        if source is None:
            return False
        origin = Spec.model_validate(json.loads(self._deployment(name, source)["spec"]))
        return Spec.model_validate(facts.spec).rollout_part() == origin.rollout_part()

    @rule(name=st.sampled_from(NAMES), resume=st.booleans())
    def pause_or_resume(self, name: str, resume: bool) -> None:
        self._pause_or_resume(name, resume)

    def _pause_or_resume(self, name: str, resume: bool) -> None:
        def model() -> tuple[str | None, Callable[[Any], None]]:
            facts = self._facts(name)

            def check(_: None) -> None:
                assert self._facts(name).paused != resume

            return "notfound" if not facts.exists else "refused" if facts.paused != resume else None, check

        call = self.app.resume if resume else self.app.pause
        self._command(f"rollout {'resume' if resume else 'pause'} {name}", model, lambda meta: call(name, meta))

    @rule(which=st.sampled_from([0, 1]), codes=st.lists(st.sampled_from([0, 0, 0, 0, 1, 3]), min_size=3, max_size=8))
    def drive_through(self, which: int, codes: list[int]) -> None:
        """As `drive`, further: through steps, measurements (1 failed, 3 inconclusive) and pauses, to the
        ends where automatic rollbacks are decided."""
        self.drive(which, codes)

    @rule(
        name=st.sampled_from(NAMES),
        change=st.sampled_from(SPEC_CHANGES),
        policy=st.sampled_from(POLICIES),
        limit=st.integers(1, 3),
        data=st.data(),
    )
    def config(self, name: str, change: str, policy: str, limit: int, data: st.DataObject) -> None:
        """`config set NAME` with one change (or nothing to change), or `config create NAME`."""
        if change == "create":
            self._create_config(name, data.draw(specs(name), label="spec"))
            return
        self.serial += 1
        serial = self.serial

        def mutate(spec: Spec) -> Spec:
            return change_spec(spec, change, name, serial, policy, limit)

        def model() -> tuple[str | None, Callable[[Any], None]]:
            facts = self._facts(name)
            if not facts.exists:
                return "notfound", lambda _: None
            old = Spec.model_validate(facts.spec)
            new = mutate(old)
            changed = new.to_data() != old.to_data()
            rollout = new.trigger == "config-change" and not facts.paused and new.rollout_part() != old.rollout_part()
            triggers = changed and rollout

            # 7.11: a lowered approval guard waits for `config approve`; the rest of the change applies
            lowered = approval.lowers(old.to_data(), new.to_data())
            expected = approval.with_guard(new.to_data(), old.to_data()) if lowered else new.to_data()

            def check(result: tuple[bool, int | None]) -> None:
                assert result == (True, facts.latest + 1 if triggers else None)
                assert self._facts(name).spec == expected
                if triggers:
                    assert self._deployment(name, facts.latest + 1)["cause"] == "config change"
                    assert all(self._cancelled_or_failed(name, v) for v in facts.open), facts.open

            return None if changed else "unchanged", check

        self._command(f"config set {name} ({change})", model, lambda meta: self.app.set_config(name, mutate, meta))

    # -- freezes and approvals ----------------------------------------------------------

    def _freeze_of(self, name: str | None) -> dict[str, Any] | None:
        """The freeze of config `name` (None: of all) that the log has not lifted, if in force now."""
        self._catch_up_checker()
        stream = str(ALL_ID) if name is None else str(self.app.config(name).id)
        row = self.checker.db("history").execute("SELECT until FROM freezes WHERE stream = ? AND frozen = 1", (stream,))
        found = row.fetchone()
        freeze = None if found is None else {"until": found[0]}
        return freeze if in_force(freeze, datetime.now(UTC)) else None

    @rule(name=st.none() | st.sampled_from(NAMES), until=st.sampled_from(FREEZE_UNTIL))
    def freeze(self, name: str | None, until: timedelta | None) -> None:
        """`freeze NAME` or `freeze --all`, until unfreeze or for an hour (a late pass looks past it: the
        plan then proposes a claim that the aggregates refuse, on the real clock)."""
        end = None if until is None else datetime.now(UTC) + until

        def model() -> tuple[str | None, Callable[[Any], None]]:
            if name is not None and not self._facts(name).exists:
                return "notfound", lambda _: None

            def check(_: None) -> None:
                assert self._freeze_of(name) is not None

            return None, check

        what = f"freeze {name or '--all'}"
        targets = None if name is None else [name]
        self._command(what, model, lambda meta: self.app.freeze(targets, end, "model", datetime.now(UTC), meta))

    @rule(name=st.none() | st.sampled_from(NAMES))
    def unfreeze(self, name: str | None) -> None:
        def model() -> tuple[str | None, Callable[[Any], None]]:
            if name is not None and not self._facts(name).exists:
                return "notfound", lambda _: None

            def check(_: None) -> None:
                assert self._freeze_of(name) is None

            return ("refused" if self._freeze_of(name) is None else None), check

        targets = None if name is None else [name]
        self._command(
            f"unfreeze {name or '--all'}", model, lambda meta: self.app.unfreeze(targets, datetime.now(UTC), meta)
        )

    def _waiting(self) -> list[str]:
        """The configs whose latest deployment waits for an approval."""
        rows = self._desired()
        latest = {r["config"]: r for r in sorted(rows, key=lambda r: r["revision"])}
        return sorted(n for n, r in latest.items() if r["phase"] == phases.NEW and r["approval"])

    @rule(name=st.sampled_from(NAMES), approver=st.sampled_from(APPROVERS[1:] * 2 + APPROVERS[:1]), data=st.data())
    def approve(self, name: str, approver: str, data: st.DataObject) -> None:
        """`rollout approve NAME [--revision N]`, by the actor who asked for the attempt or by another;
        mostly of a config whose latest deployment waits for one, when there is such a config."""
        waiting = self._waiting()
        if waiting and data.draw(st.integers(0, 3), label="pick a waiting one") > 0:
            name = data.draw(st.sampled_from(waiting), label="waiting config")
        facts = self._facts(name)
        revision = data.draw(st.none() | st.none() | st.integers(1, max(1, facts.latest + 1)), label="revision")

        def model() -> tuple[str | None, Callable[[Any], None]]:
            facts = self._facts(name)
            target = revision or facts.latest
            if not facts.exists or (revision is not None and not 1 <= revision <= facts.latest):
                return "notfound", lambda _: None
            if facts.latest == 0:  # no rollout yet: nothing waits for an approval (DESIGN 7.4, exit 1)
                return "refused", lambda _: None
            row = self._deployment(name, target)
            waiting = row["needs_approval"] and row["approved_by"] is None and row["phase"] == phases.NEW
            # who asked: the user, but for an automatic promotion's first attempt, which the controller asked for
            by_user = row["attempt"] > 1 or row["message"] != stage.AUTOMATIC
            expect = None if waiting and (approver != USER or not by_user) else "refused"

            def check(result: tuple[int, int]) -> None:
                assert result == (target, row["attempt"])
                assert self._deployment(name, target)["approved_by"] == approver

            return expect, check

        def call(meta: dict[str, Any]) -> Any:
            return self.app.approve(name, revision, {**meta, "actor": approver})

        self._command(f"rollout approve {name} --revision {revision} (as {approver})", model, call)

    # -- controllers -----------------------------------------------------------------

    @rule(which=st.sampled_from([0, 1]))
    def controller_pass(self, which: int) -> None:
        """One pass of either controller on its live store."""
        self._pass(which)

    @rule(which=st.sampled_from([0, 1]))
    def late_controller_pass(self, which: int) -> None:
        """A pass on the live store after every open attempt's timeout."""
        self._pass(which, late=True)

    @rule(which=st.sampled_from([0, 1]), late=st.booleans(), data=st.data())
    def lagging_controller_pass(self, which: int, late: bool, data: st.DataObject) -> None:
        """A pass planned on `desired` as it was some events ago (a view behind the log), maybe also late."""
        self._pass(which, "back_in_time", late=late, data=data)

    @rule(
        which=st.sampled_from([0, 1]), view=st.sampled_from(["frozen", "snapshot"]), late=st.booleans(), data=st.data()
    )
    def stale_controller_pass(self, which: int, view: str, late: bool, data: st.DataObject) -> None:
        """A pass on the projections as they are on disk, or on an old copy of them (see _pass), maybe late."""
        self._pass(which, view, late=late, data=data)

    @rule(which=st.sampled_from([0, 1]), codes=st.lists(st.sampled_from([0, 0, 1]), min_size=1, max_size=2))
    def drive(self, which: int, codes: list[int]) -> None:
        """Rollouts move on: passes, every deployer starting, then exiting with the next code; a last
        pass creates what comes next (left running)."""
        for code in codes:
            self._pass(which)
            for name in self.runtime.names("created"):
                self.runtime.start(name)
            self._pass(which)
            for name in self.runtime.names("running"):
                self.runtime.exit(name, code)
        self._pass(which)
        self._pass(which)

    @rule(
        when=st.sampled_from(["before_create", "after_create", "before_save", "before_command_save"]),
        action=st.sampled_from(
            [
                "crash",
                "twin",
                "late_twin",
                "stale_twin",
                "cancel",
                "supersede",
                "latest",
                "retry",
                "pause",
                "delete",
                "vanish",
            ]
        ),
    )
    def arm_fault(self, when: str, action: str) -> None:
        """Something happens inside the controller's next create, or just before the next save of a
        controller or of a user command (a racing writer: that save conflicts and is decided again)."""

        def fault(name: str | None, config: str) -> None:
            if action == "crash":
                raise SimCrash(f"crashed {when} ({name or config})")  # the controller, or the command's process
            if action in ("twin", "late_twin", "stale_twin"):  # the second controller, in the middle
                view = "frozen" if action == "stale_twin" else "live"
                self._pass(1, view, late=action == "late_twin")
            elif action == "cancel":
                self._cancel(config)
            elif action in ("supersede", "latest"):
                self._latest(config, action == "supersede")
            elif action == "retry":
                self._retry(config)
            elif action == "pause":
                self._pause_or_resume(config, resume=self._facts(config).paused)
            elif name is not None and name in self.runtime.rows:
                getattr(self.runtime, action)(name)  # delete or vanish a deployer just created

        if when == "before_save":
            self.save_faults.append(fault)
        elif when == "before_command_save":
            self.command_races.append(fault)
        else:
            self.runtime.arm(when.split("_")[0], fault)

    # -- deployers -------------------------------------------------------------------

    def _pick(self, data: st.DataObject, *states: str) -> str:
        return data.draw(st.sampled_from(self.runtime.names(*states)), label="deployer")

    @precondition(lambda self: self.runtime.names(*DELETABLE))
    @rule(data=st.data(), event=st.sampled_from(DEPLOYER_EVENTS))
    def deployer(self, data: st.DataObject, event: str) -> None:
        """Something happens to a deployer (to one it applies to, else to any live or deletable one)."""
        states = {"starts": ("created",), "killed": ("running",), "deleted": DELETABLE}.get(event, ACTIVE)
        if not self.runtime.names(*states):
            event, states = "deleted", DELETABLE
        name = self._pick(data, *states)
        if event == "starts":
            self.runtime.start(name)
        elif event.startswith("exits"):
            self.runtime.exit(name, int(event.split()[1]))
        elif event == "killed":
            self.runtime.kill(name, data.draw(st.sampled_from([9, 15]), label="signal"))
        elif event == "deleted":
            self.runtime.delete(name)  # `deployers delete`: what a user deleting a pod does (ended too)
        else:
            self.runtime.vanish(name)  # its shim vanished: the runtime says lost

    # -- reports from outside the controller's plan -------------------------------------

    @rule(data=st.data(), kind=st.sampled_from(REPORTS))
    def report(self, data: st.DataObject, kind: str) -> None:
        """A report from outside the controller's plan: a stale one, or a true one delivered twice."""
        if kind == "duplicate":
            self._duplicated_report(data)
        else:
            self._stale_report(data, kind.split()[1], data.draw(st.sampled_from([0, 1]), label="exit code"))

    def _stale_report(self, data: st.DataObject, kind: str, code: int) -> None:
        """A report about a deployer that is not the current step (older attempt, finished, moved past)."""
        self._catch_up_checker()
        current = {r["step"] for r in self._desired() if r["phase"] in phases.OPEN and r["step"]}
        steps = self.checker.db("history").execute("SELECT name, config, revision FROM steps").fetchall()
        known = {name: (config, revision) for name, config, revision in steps}
        known.update({r.name: (r.config, r.revision) for r in self.runtime.rows.values()})
        stale = sorted(set(known) - current)
        if not stale:
            return
        name = data.draw(st.sampled_from(stale), label="stale deployer")
        config, revision = known[name]
        meta = new_meta("stale-reporter@model")
        changes = {
            "exited": lambda d: d.report_exited(name, code, None, meta),
            "lost": lambda d: d.report_lost(name, "stale report", meta),
            "started": lambda d: d.report_started(name, meta),
            "created": lambda d: d.report_created(name, f"local:{name}", meta),
        }
        before = self.head()
        applied = commands.report(self.app, config, revision, changes[kind], meta)
        assert not applied and self.head() == before, f"stale report {kind} about {name} changed the log"

    def _duplicated_report(self, data: st.DataObject) -> None:
        """The true report about an ended deployer, delivered twice: the second changes nothing."""
        if not self.runtime.names("exited", "deleted", "lost"):
            return
        name = self._pick(data, "exited", "deleted", "lost")
        row = self.runtime.rows[name]
        meta = new_meta("duplicate-reporter@model")

        def change(d: Any) -> bool:
            if row.state == "exited":
                return d.report_exited(name, row.exit_code, row.reason, meta)
            return d.report_lost(name, row.reason or f"deployer {row.state}", meta)

        commands.report(self.app, row.config, row.revision, change, meta)
        before = self.head()
        again = commands.report(self.app, row.config, row.revision, change, meta)
        assert not again and self.head() == before, f"a duplicated report about {name} changed the log"

    # -- projections -------------------------------------------------------------------

    @rule(
        action=st.sampled_from(["rebuild", "shadow rebuild", "snapshot", "restore", "delete", "foreign"]),
        which=st.sampled_from([0, 1]),
        names=st.lists(st.sampled_from(PROJECTIONS), unique=True, max_size=3),
        data=st.data(),
    )
    def projections(self, action: str, which: int, names: list[str], data: st.DataObject) -> None:
        """`projections rebuild [NAME]... [--shadow]` through either store; or, with every connection
        closed: copy the projections folder, put an earlier copy back (the read models go back in
        time), delete it, or put in its place the projections of another log (maybe ahead of ours)."""
        if action.endswith("rebuild"):
            self.stores[which].rebuild(projections_named(names), shadow=action == "shadow rebuild")
            return
        self._close_stores()
        if action == "snapshot":
            folder = self._scratch("snapshot")
            shutil.copytree(self.home.projections, folder)
            for old in self.snapshots[:-2]:
                shutil.rmtree(old)
            self.snapshots = [*self.snapshots[-2:], folder]
        else:
            shutil.rmtree(self.home.projections)
            if action == "restore" and self.snapshots:
                shutil.copytree(data.draw(st.sampled_from(self.snapshots), label="snapshot"), self.home.projections)
            elif action == "foreign":
                self._foreign_projections(data.draw(st.integers(0, 12), label="foreign rollouts"))
        self._open_stores()

    def _foreign_projections(self, rollouts: int) -> None:
        """Projections caught up on another log (same config names, other events) into the live folder."""
        home = Home(self._scratch("foreign"))
        app = open_app(home, None)
        try:
            app.create_config("a", Spec(command=["deploy", "a"], trigger="config-change"), new_meta(USER))
            for _ in range(rollouts):
                app.latest("a", None, True, new_meta(USER))
            store = ProjectionStore(self.home.projections, RecorderSource(app.recorder))
            store.catch_up()
            close_store(store)
            self._released()
        finally:
            app.close()

    # -- invariants --------------------------------------------------------------------

    @invariant()
    def invariants_hold(self) -> None:
        self.steps += 1
        if self.steps % LIVE_CHECK_EVERY == 0:
            self._check_live(self.stores[:1])
        seen = (self.head(), self.runtime.changes)
        if seen == self.seen:
            return  # neither the log nor the runtime changed: the checks below would see the same
        self.seen = seen
        self._catch_up_checker()
        self._check_runtime()
        self._check_log()
        if self.steps % REPLAY_EVERY == 0:
            self._check_replay()

    def _check_runtime(self) -> None:
        """I1 and I2 on the ground truth: the simulation's spawns and live deployers."""
        twice = sorted(n for n, count in self.runtime.spawns.items() if count > 1)
        assert not twice, f"I1: deployers spawned twice: {twice}"
        crowded = {c: n for c, n in self.runtime.max_alive.items() if n > 1}
        assert not crowded, f"I2: configs that had several deployers alive at once: {crowded}"
        active = {(r["config"], r["revision"]): r for r in self._desired() if r["phase"] in phases.ACTIVE}
        for config, alive in self.runtime.alive.items():
            for name in alive:
                row = self.runtime.rows[name]
                d = active.get((config, row.revision))
                assert d is not None and d["step"] == name and d["attempt"] == row.attempt, (
                    f"I2: deployer {name} is alive but the log says {d or 'its deployment is not active'}"
                )

    def _check_log(self) -> None:
        """I1-I3 as `rollouts audit` sees them, creations backed by spawns, acknowledged commands kept."""
        db = self.checker.db("audit")
        rows = db.execute(AUDIT_SQL).fetchall()
        result = audit((p, t, c, v, json.loads(d)) for p, t, c, v, d in rows)
        assert not result.violations, f"audit: {[v.as_dict() for v in result.violations]}"
        found = audit_rules(audit_queries.rule_events(db))  # and G1, G2 (freezes, approvals), I9, I10 (steps)
        assert not found, f"audit: {[v.as_dict() for v in found]}"
        created = {json.loads(d)["name"] for (d,) in db.execute(CREATED_SQL).fetchall()}
        never = sorted(created - set(self.runtime.spawns))
        assert not never, f"I1: the log records as created deployers never spawned: {never}"
        kept = {c for (c,) in db.execute("SELECT DISTINCT correlation_id FROM events").fetchall()}
        lost = {c: what for c, what in self.acked.items() if c not in kept}
        assert not lost, f"I6: acknowledged commands missing from the log: {lost}"

    def _expected(self) -> dict[str, list[tuple[Any, ...]]]:
        """The replay from zero at the current head (computed once per head)."""
        head = self.head()
        if self.expected_at != head:
            self.expected, self.expected_at = self.replay.dump(), head
        return self.expected

    def _check_replay(self) -> None:
        """I5: the step-by-step store (old events delivered again) equals a replay from zero."""
        expected = self._expected()
        got = dump(self.checker)
        assert got == expected, f"I5: incremental != replay:\n{differences(got, expected)}"

    def _check_live(self, stores: Sequence[ProjectionStore]) -> None:
        """I5 on the controllers' stores, caught up; the last few events delivered again change nothing."""
        expected = self._expected()
        head = self.head()
        for store in stores:
            store.catch_up()
            got = dump(store)
            assert got == expected, f"I5: a live store != replay:\n{differences(got, expected)}"
            store._feed({p.name: store.db(p.name) for p in ALL}, max(0, head - 5), head)
            got = dump(store)
            assert got == expected, f"I5: old events delivered again changed a store:\n{differences(got, expected)}"

    def teardown(self) -> None:
        try:
            if sys.exc_info()[0] is None:  # not while a failure propagates: it would hide it
                self._catch_up_checker()
                if os.environ.get("ROLLOUTS_MODEL_TALLY"):  # which event types the run made (to size the model)
                    with open(os.environ["ROLLOUTS_MODEL_TALLY"], "a") as tally:
                        for (type_,) in self.checker.db("audit").execute("SELECT type FROM events").fetchall():
                            tally.write(type_ + "\n")
                self._check_replay()
                self._check_live(self.stores)
        finally:
            try:
                for store in (*self.stores, self.checker):
                    close_store(store)
                self.events.close()
                self.app.close()
            finally:
                shutil.rmtree(self.root, ignore_errors=True)


TestRolloutModel = RolloutModel.TestCase
TestRolloutModel.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
TestRolloutModel.pytestmark = [pytest.mark.slow]  # EXAMPLES runs of STEPS steps: minutes


# -- regressions: sequences hypothesis found, replayed step by step ----------------------------


class Draws:
    """Stands for hypothesis' `data` in a replayed step: answers each draw with the next value."""

    def __init__(self, *values: Any) -> None:
        self.values = list(values)

    def draw(self, strategy: Any, label: str | None = None) -> Any:
        return self.values.pop(0)


@contextmanager
def replayed() -> Iterator[RolloutModel]:
    state = RolloutModel()
    try:
        yield state
    finally:
        state.teardown()


def test_timeout_on_a_stale_view_leaves_the_later_step_running() -> None:
    """A bug the model found (hypothesis' shrunk sequence), fixed in executor._end_attempt.

    b's deployer exited 0 and its post hook runs (current step). A pass that is late (past b's 60 s
    timeout) and plans from a view of the log at position 6 (the deployer still current) timed b out:
    it stopped the deployer named by the plan (already ended), then appended DeployerFailed(timeout)
    and RolloutEnded; the post hook was never stopped, and a new revision of b was then claimed and
    created beside it (two deployers of b alive at once: I2).
    """
    post_hook = Hook(command=["post-hook", "b"], policy="abort")
    with replayed() as state:
        state.create_configs(
            a=Spec(command=["deploy", "a"], timeout=60, history_limit=1),
            b=Spec(command=["deploy", "b"], timeout=60, trigger="config-change", post_hook=post_hook),
        )
        state.invariants_hold()
        state.drive(codes=[0], which=0)
        state.invariants_hold()
        assert state.runtime.names("created", "running") == ["b-1-hook-post-1"]
        lag = state.head() - 6  # the view at log position 6: b's deployer still the current step
        state.lagging_controller_pass(which=0, late=True, data=Draws(lag))
        state.latest("b", supersede=False)
        state.controller_pass(which=0)
        assert state.runtime.max_alive["b"] == 1, f"alive at once: {state.runtime.max_alive}"
        state.invariants_hold()
