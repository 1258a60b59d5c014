"""The controller loop: catch up, plan, execute; until stopped, idle, or out of time."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from eventsourcing.persistence import PersistenceError

from adapters.application import WriteConflict
from adapters.controller.executor import Executor
from adapters.controller.plan import plan
from adapters.home import Home
from adapters.leases import Leases
from adapters.runtime.local import LocalRuntime
from domain.errors import DomainError, NotFound
from projections.store import BY_NAME

TRANSIENT = (PersistenceError, sqlite3.OperationalError)
OPEN_ROWS = "SELECT * FROM open_deployments WHERE phase IN ('New', 'Pending', 'Running') ORDER BY config, version"
Log = Callable[[str], None]


def claimant_id(home: Home) -> str:
    """The stable id of the controllers of this home, kept in runtime/claimant."""
    path = home.runtime / "claimant"
    with home.init_lock():
        if not path.exists():
            path.write_text(uuid.uuid4().hex + "\n")
            path.chmod(0o600)
        return path.read_text().strip()


class Controller:
    def __init__(
        self,
        app: Any,
        projections: Any,
        runtime: LocalRuntime,
        claimant: str,
        actor: str,
        cwd: str,
        log: Log | None = None,
    ) -> None:
        self.app = app
        self.projections = projections
        self.runtime = runtime
        self.claimant = claimant
        self.executor = Executor(app, runtime, claimant, actor, cwd)
        self.leases = Leases(app)
        self.log = log or (lambda _: None)
        self.stopping = threading.Event()

    def reconcile(self) -> tuple[int, int]:
        """One pass; returns (open deployments seen, actions taken)."""
        self._renew_lease()
        self.projections.catch_up([BY_NAME["desired"]])
        rows = list(self.projections.db("desired").query(OPEN_ROWS))
        self.runtime.observe()
        observed = {r["step"]: self.runtime.get(r["step"]) for r in rows if r["step"]}
        by_stream = {(r["config"], r["version"]): r["notification_id"] for r in rows}
        expired = frozenset(self.leases.expired() - {self.claimant})
        actions = plan(rows, observed, self.claimant, datetime.now(UTC), expired)
        for action in actions:
            if self.stopping.is_set() and action.kind in ("claim", "create"):
                break
            self.log(f"{action.kind} {action.name or ''} ({action.config} v{action.version} attempt {action.attempt})")
            try:
                self.executor.run(action, by_stream.get((action.config, action.version)))
            except (WriteConflict, DomainError, NotFound) as error:
                self.log(f"skipped {action.kind}: {error}")
        self._prune()
        return len(rows), len(actions)

    def _renew_lease(self) -> None:
        """Renew our lease in the log's database; beat for our shims only while it is fresh."""
        self.leases.renew(self.claimant)
        if time.monotonic() - self.leases.renewed < self.leases.seconds / 4:
            self.runtime.beat()

    def _prune(self) -> None:
        """History limit: keep runtime records and logs of the last N versions of each ended config."""
        for name in self.executor.ended:
            try:
                limit = self.app.config(name).spec["history_limit"]
            except NotFound:
                continue
            rows = [r for r in self.runtime.list() if r.config == name]
            keep = sorted({r.revision for r in rows}, reverse=True)[:limit]
            old = [r.name for r in rows if r.revision not in keep and r.state not in ("created", "running")]
            if old:
                self.runtime.prune(old)
        self.executor.ended.clear()

    def run(self, *, once: bool, until_idle: bool, interval: float, timeout: float | None) -> int:
        """Loop until stopped (exit 0), idle with --until-idle (0), or past --timeout (1 if until-idle)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._handle_signals()
        failures = 0
        while True:
            try:
                open_count, acted = self.reconcile()
                failures = 0
            except TRANSIENT as error:
                failures += 1
                self.log(f"store unavailable ({type(error).__name__}: {error}); retrying")
                self.stopping.wait(min(5.0, 0.1 * 2**failures))
                open_count, acted = 1, 0
            if once or self.stopping.is_set():
                return 0
            if until_idle and open_count == 0 and acted == 0:
                return 0
            if deadline is not None and time.monotonic() >= deadline:
                return 1 if until_idle else 0
            if not acted:
                self.stopping.wait(interval)

    def _handle_signals(self) -> None:
        def stop(signum: int, _: object) -> None:
            self.log(f"received signal {signum}: finishing this pass")
            self.stopping.set()

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)
