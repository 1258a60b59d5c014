"""The controller loop: catch up, plan, execute; until stopped, idle, or out of time."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import PersistenceError

from ...domain import ids
from ...domain.errors import DomainError, NotFound, StoreProblem
from ...projections import freezes
from ...projections.desired import OPEN_ROWS
from ...projections.health import is_broken
from ...projections.store import BY_NAME, ProjectionStore
from ..home import Home
from ..runtime.port import Observed, Runtime, claim_parts
from ..service import commands
from ..service.application import RolloutsApp, WriteConflict
from ..service.leases import Leases
from ..store.failures import disk_problem, not_utf8
from ..store.port import StoreUnavailable
from .executor import Executor
from .plan import REPORTS, Action, Kind, batches, gated, plan, waits_for_human
from .promoter import Promoter
from .twins import Twins
from .watch import Watch

if TYPE_CHECKING:
    from ..notify.notifier import Notifier

TRANSIENT = (PersistenceError, sqlite3.OperationalError)
HEALS = 3  # passes in a row that may each heal a broken view before the controller gives up
OBSERVE_EVERY_S = 0.05
# Page cache per SQLite connection the controller keeps open (SQLite's default: 2,000 KiB). Its
# reads are small (open deployments, unended deployers) and the OS caches the files; with the
# default, its memory grew by the caches filling as the files grew (RSS 1.20x over 10,000 rollouts).
SQLITE_CACHE_KIB = 256
STANDBY_S = 0.1  # how often a standing-by twin tries to lead
Log = Callable[[str], None]


class PassCutShort(Exception):
    """A single pass committed events, then the disk or the store failed it: done, though not all of it."""


# How the narration names each kind of action: what the controller did, in the words of `deployers list`
SAID = {
    Kind.CLAIM: "claim",
    Kind.CREATE: "create",
    Kind.RECORD_CREATED: "created",
    Kind.RECORD_STARTED: "started",
    Kind.RECORD_EXIT: "exited",
    Kind.RECORD_LOST: "lost",
    Kind.STOP: "stop",
    Kind.CANCEL: "cancel",
    Kind.TIMEOUT: "timeout",
}


def _kinds(batch: tuple[Action, ...]) -> str:
    return ", ".join(SAID.get(a.kind, a.kind) for a in batch)


CLAIMANT = re.compile(r"[0-9a-f]{32}")


class ClaimantDamaged(StoreProblem):
    """runtime/claimant does not hold a claimant id (the CLI exits 5)."""


def claimant_id(home: Home) -> str:
    """The stable id of the controllers of this home, kept in runtime/claimant: made whole or not at all
    (written aside, then renamed), and refused unless it is one (an empty id would be every home's: two
    hosts sharing a PostgreSQL log would each take the other's claims for its own and run them)."""
    path = home.runtime / "claimant"
    with home.init_lock():
        if not path.exists():
            aside = path.with_name(f"claimant.{uuid.uuid4().hex}")
            fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(uuid.uuid4().hex + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(aside, path)
        try:
            found = path.read_text().strip()
        except (OSError, UnicodeDecodeError) as error:
            raise ClaimantDamaged(f"{path} cannot be read ({type(error).__name__})") from None
    if not CLAIMANT.fullmatch(found):
        raise ClaimantDamaged(
            f"{path} holds no claimant id (32 hex digits): it was damaged. Once no deployer of this home runs"
            " (deployers list), remove it and the next controller makes a new one"
        )
    return found


def claimant_where(home: Home) -> str:
    """Where the controllers of `home` run, as their lease names it: the host, and which file runtime/claimant
    is (device and inode: a copy of the home is another file; the home moved on its disk keeps it)."""
    st = os.stat(home.runtime / "claimant")
    return f"{socket.gethostname()} {st.st_dev}:{st.st_ino}"


class Controller:
    def __init__(
        self,
        app: RolloutsApp,
        projections: ProjectionStore,
        runtime: Runtime,
        claimant: str,
        actor: str,
        cwd: str,
        log: Log | None = None,
        check_log: Callable[[], None] | None = None,
        notifier: Notifier | None = None,
        where: str | None = None,
        fence: Mapping[str, str] | None = None,
    ) -> None:
        """`where`: claimant_where of the home, which the lease keeps (None: a lease of any home is taken);
        `fence`: ROLLOUT_HOME and ROLLOUT_STORE for `claim check` in every process it starts."""
        self.app = app
        self.notifier = notifier  # adapters.notify.notifier.Notifier: sends in threads of its own, never in a pass
        self.check_log = check_log or (lambda: None)  # raises when the log is no longer the home's
        self.projections = projections
        self.runtime = runtime
        self.claimant = claimant
        self.executor = Executor(app, runtime, claimant, actor, cwd, fence)
        self.leases = Leases(app, where=where)
        self.log = log or (lambda _: None)
        self.promoter = Promoter(app, self.executor.meta, self.log)
        self.stopping = threading.Event()
        self.twins: Twins | None = None  # the long-running controllers of this home, once run() runs
        # Looking for shims that vanished (runtime.observe) costs a look at every active deployer:
        # a running controller does it at most this often, a single pass always.
        self.observe_every = 0.0
        self._observed_at = float("-inf")

    def _stop_ended_elsewhere(self, running: Sequence[Observed], rows: Sequence[Mapping[str, Any]]) -> None:
        """Stop at once each deployer of ours that the log no longer gives us: its claim was ended elsewhere
        (another controller recorded it Lost once our lease lapsed: a partition, a paused host), and the
        next attempt may already run on another host. Rows made for no claim (before claims were recorded)
        are left alone."""
        ours = {r["step"] for r in rows if r["claimant"] == self.claimant and r["step"]}
        for row in running:
            if row.name in ours or claim_parts(row.claim) is None:
                continue
            self.log(f"stop {row.name}: its claim was ended elsewhere")
            self.runtime.stop(row.name, reason="its claim was ended elsewhere: the log no longer gives it to us")

    def reconcile(self) -> tuple[int, int]:
        """One pass; returns (open deployments seen, actions taken)."""
        self.executor.begin_pass()
        self.check_log()
        self._renew_lease()
        running = self.runtime.active()  # before catching up: the claim of each was committed before it
        self.projections.catch_up([BY_NAME["desired"]])
        rows: list[dict[str, Any]] = self.projections.query("desired", OPEN_ROWS)
        self._stop_ended_elsewhere(running, rows)
        if time.monotonic() - self._observed_at >= self.observe_every:
            self.runtime.observe()
            self._observed_at = time.monotonic()
        # Only our own steps: plan leaves the others' deployments to them (or ends them as Lost).
        observed = {
            r["step"]: self.runtime.get(r["step"]) for r in rows if r["step"] and r["claimant"] == self.claimant
        }
        by_stream = {(r["config"], r["revision"]): r["notification_id"] for r in rows}
        # Leases matter only for deployments other claimants hold: none open, no query (a round trip on PostgreSQL).
        others = {r["claimant"] for r in rows if r["claimant"] and r["claimant"] != self.claimant}
        expired = frozenset(self.leases.expired() & others) if others else frozenset()
        now = datetime.now(UTC)
        frozen = {str(f["stream"]): f for f in self.projections.query("desired", freezes.IN_LOG)}  # the local view
        born = self.runtime.born() if None in observed.values() else None  # asked only when a row is missing
        actions = plan(rows, observed, self.claimant, now, expired, frozen, born)
        planned = batches(actions)
        claims = [b for b in planned if b[0].kind == Kind.CLAIM]
        reports = [b for b in planned if b[0].kind in REPORTS]
        rest = [b for b in planned if b[0].kind != Kind.CLAIM and b[0].kind not in REPORTS]
        # Claims first (their deployers start at once), then reports: each group is one append.
        for group in (claims, reports):
            if group is claims and self.stopping.is_set():
                continue
            for batch in group:
                self._narrate(batch)
            for batch, error in self.executor.run_group(group, by_stream):
                self.log(f"skipped {_kinds(batch)}: {error}")
        for batch in rest:
            if self.stopping.is_set() and batch[0].kind == Kind.CREATE:
                break
            self._narrate(batch)
            try:
                self.executor.run_batch(batch, by_stream.get((batch[0].config, batch[0].revision)))
            except (WriteConflict, DomainError, NotFound) as error:
                self.log(f"skipped {_kinds(batch)}: {error}")
        self._prune()
        promoted = 0 if self.stopping.is_set() else self.promoter.run(self.projections)  # 7.10: auto stages
        # What waits for an approval or a freeze keeps no --until-idle controller running.
        # Nor does a deployment paused for `rollout promote` (7.6), nor an upstream revision soaking (7.10).
        waiting = sum(not gated(r, frozen, now) and not waits_for_human(r) for r in rows)
        return waiting, len(actions) + promoted

    def _narrate(self, batch: tuple[Action, ...]) -> None:
        first = batch[0]
        what = " ".join(filter(None, (_kinds(batch), first.name)))  # a claim names no deployer yet
        self.log(f"{what} ({first.config} v{first.revision} attempt {first.attempt})")

    def _renew_lease(self) -> None:
        """Renew our lease in the log's database; beat for our shims only while it is fresh, as of the
        renewal's sending: a shim stops its deployer at half a lease from the last renewal (DESIGN 7.7),
        not half a lease from the last pass that found the lease still fresh."""
        self.leases.renew(self.claimant)
        if time.monotonic() - self.leases.renewed < self.leases.seconds / 4:
            self.runtime.beat(self.leases.renewed_boot)

    def _prune(self) -> None:
        """History limit: keep runtime records and logs of the last N versions of each ended config."""
        if not self.executor.ended:
            return
        by_config: dict[str, list[Observed]] = {}
        for row in self.runtime.list(configs=self.executor.ended):
            by_config.setdefault(row.config, []).append(row)
        configs = [ids.config_id(name) for name in by_config]
        with self.app.preloaded(configs) if len(configs) > 1 else contextlib.nullcontext():  # one read for all
            limits = {}
            for name in by_config:
                with contextlib.suppress(NotFound):
                    limits[name] = commands.peek_config(self.app, name).spec["history_limit"]
        for name, rows in by_config.items():
            if name not in limits:
                continue
            keep = sorted({r.revision for r in rows}, reverse=True)[: limits[name]]
            old = [r.name for r in rows if r.revision not in keep and r.state not in ("created", "running")]
            if old:
                self.runtime.prune(old)
        self.executor.ended.clear()

    def run(self, *, once: bool, until_idle: bool, interval: float, timeout: float | None) -> int:
        """Loop until stopped (exit 0), idle with --until-idle (0), or past --timeout (1 if until-idle); with
        --until-idle, stopped (SIGTERM, Ctrl-C) before idle is 1 too."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._handle_signals()
        if not once:  # a single pass needs no warming up
            self.observe_every = min(interval, OBSERVE_EVERY_S)
        if not once and not until_idle:  # a controller that runs until stopped: one of a home works
            self.twins = Twins(self.runtime.folder / "controllers")
        try:
            if self.twins is not None and not self._lead(self.twins, deadline):
                return 0
            if not once:
                self._warm_up()
                if self.notifier is not None:
                    self.notifier.start()
            watch = Watch(self.app, self.runtime, interval)
            try:
                return self._loop(once, until_idle, interval, deadline, watch)
            finally:
                watch.close()
        finally:
            if self.notifier is not None:
                self.notifier.stop()
            if self.twins is not None:
                self.twins.close()
                self.twins = None

    def _loop(self, once: bool, until_idle: bool, interval: float, deadline: float | None, watch: Watch) -> int:
        failures = 0
        woke = False  # the last wait ended early, on a change
        idle = 0  # passes in a row that such a change started, and that found nothing to do
        heals = 0  # passes in a row that met a broken view and rebuilt it
        while True:
            watch.mark()  # what changes from now on ends the next wait early
            try:
                open_count, acted = self._single_pass() if once else self.reconcile()
                failures = heals = 0
            except TRANSIENT as error:
                if once:
                    raise  # _single_pass made it the command's error: no pass follows to retry it
                if not_utf8(error) is not None:
                    raise  # a log edited by hand to hold text that is not UTF-8: no retry reads it
                failures += 1
                self.log(f"store unavailable ({type(error).__name__}: {error}); retrying")
                self.stopping.wait(min(5.0, 0.1 * 2**failures))
                open_count, acted = 1, 0
            except sqlite3.DatabaseError as error:
                # A view broken deep in its file (bytes written over it), met by a query: rebuild it and
                # pass again, as read commands heal (cli.state.healing); a view that keeps breaking stops us.
                heals += 1
                if heals > HEALS or not is_broken(error) or not self.projections.heal_broken():
                    raise
                self.log(f"a view was broken ({error}); rebuilt it, passing again")
                continue
            if once:
                return 0
            if until_idle and open_count == 0 and acted == 0 and not self._notifying():
                return 0
            if self.stopping.is_set():  # with --until-idle, stopped before idle: what it promised did not happen
                return 1 if until_idle else 0
            if deadline is not None and time.monotonic() >= deadline:
                return 1 if until_idle else 0
            idle = min(idle + 1, 16) if woke and not acted else 0
            woke = False
            if not acted:
                # A new event or a deployer's news ends the wait early; changes that keep bringing
                # nothing to do (another controller's work) are heeded less and less often, up to the interval.
                woke = watch.wait(self.stopping, interval, settle=min(interval, watch.every * (2**idle - 1)))

    def _notifying(self) -> bool:
        """Whether a notification may still wait to be sent (a failing sink does not keep us)."""
        return self.notifier is not None and self.notifier.busy()

    def _single_pass(self) -> tuple[int, int]:
        """`--once`: a full or failing disk, or a store that refuses or fails the pass, is the command's
        error (exit 5: StoreUnavailable, or the disk's own), unless the pass had already committed
        events: then the pass counts as done, with PassCutShort to say so."""
        head = self.app.recorder.max_notification_id() or 0
        try:
            return self.reconcile()
        except Exception as error:
            problem = disk_problem(error)
            if problem is None and not isinstance(error, TRANSIENT):
                raise
            try:
                moved = (self.app.recorder.max_notification_id() or 0) > head
            except Exception:  # noqa: BLE001 - the log cannot say: nothing is known committed
                moved = False
            if moved:
                raise PassCutShort(problem or self.app.recorder.describe(error)) from error
            if problem is None:
                raise StoreUnavailable(f"the pass failed: {self.app.recorder.describe(error)}") from error
            raise

    def _lead(self, twins: Twins, deadline: float | None) -> bool:
        """Stand by while a twin leads (it does all the work); False if stopped or out of time first."""
        told = False
        while not twins.lead():
            if not told:
                self.log(f"standing by: another controller of this home leads ({twins.running()} run)")
                told = True
            if self.stopping.wait(STANDBY_S) or (deadline is not None and time.monotonic() >= deadline):
                return False
        if told:
            self.log("leading: the controller that led has stopped")
        return True

    def _warm_up(self) -> None:
        """Pay before the first pass what the first create would: the fork server, pydantic."""

        self.runtime.start_fork_server()

    def _handle_signals(self) -> None:
        def stop(signum: int, _: object) -> None:
            self.log(f"received signal {signum}: finishing this pass")
            self.stopping.set()

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)
