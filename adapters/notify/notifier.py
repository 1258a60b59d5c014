"""The controller's notifier: a thread that finds the sinks in the log and runs one worker per sink,
apart from the reconcile loop, so a slow sink never holds up a pass."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...domain.notification import Change
from ..service import sinks
from .http import timeout_seconds
from .lease import SinkLeases, lease_seconds
from .worker import Worker

if TYPE_CHECKING:
    from ..service.application import RolloutsApp

FIND_EVERY_S = 0.5


class Notifier:
    def __init__(
        self,
        open_app: Callable[[], RolloutsApp],
        meta: Callable[[], dict[str, Any]],
        log: Callable[[str], None],
        holder: str,
        delivered: Callable[[Change], None] | None = None,
        caller_app: RolloutsApp | None = None,
    ) -> None:
        self.open_app, self.meta, self.log, self.on_delivered = open_app, meta, log, delivered
        self.caller_app = caller_app  # the controller's own app: busy() may read with it, in its thread
        self.holder = f"{holder}:{uuid.uuid4().hex[:12]}"  # each controller process holds leases of its own
        self.stopping = threading.Event()
        self.ready = threading.Event()  # the sinks were looked for once
        self.workers: dict[str, Worker] = {}
        self.thread = threading.Thread(target=self._run, name="notifier", daemon=True)
        self.app: RolloutsApp | None = None

    def start(self) -> None:
        self.thread.start()

    def busy(self) -> bool:
        """Whether a change may still wait to be sent by this controller (for --until-idle)."""
        if not self.thread.is_alive():
            return False
        if not self.ready.is_set():  # still opening its store: only sinks that exist can keep us
            index = sinks.index_of(self.caller_app) if self.caller_app is not None else None
            return self.caller_app is None or bool(index and index.names)
        return any(w.busy() for w in list(self.workers.values()))

    def stop(self, wait: float = 2.0) -> None:
        """Stop sending; a send in flight may be cut off (the next controller sends it again, same key)."""
        self.stopping.set()
        if self.thread.ident is None:  # never started: a controller that stood aside for its twin, or stopped early
            return
        self.thread.join(wait)
        for worker in list(self.workers.values()):
            worker.join(wait)
            if not worker.is_alive():
                worker.release()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                if self.app is None:
                    self.app = self.open_app()
                    self.app.recorder.relax_durability()  # its own bookkeeping only
                    timeout = timeout_seconds()
                    self.leases = SinkLeases(self.app.recorder, self.holder, lease_seconds(timeout))
                self._find(self.app)
                self.ready.set()
            except Exception as error:  # noqa: BLE001 - the store may come back; notifying waits for it
                self.log(f"notify: {type(error).__name__}: {error}; retrying")
            self.stopping.wait(FIND_EVERY_S)
        for worker in list(self.workers.values()):
            worker.join()
            # While the store is open: a lease left held keeps the sink from the next controller until it
            # expires (a later `controller run --until-idle` waited ~30 s for it, after every clean exit).
            worker.release()
        if self.app is not None:
            self.app.close()

    def _find(self, app: RolloutsApp) -> None:
        """Start a worker for each sink that has none (a removed sink's worker ends by itself)."""
        for sink in sinks.all_sinks(app):
            worker = self.workers.get(sink.name)
            if worker is None or not worker.is_alive():
                worker = Worker(app, sink.name, self.leases, self.meta, self.stopping, self.log, self.on_delivered)
                self.workers[sink.name] = worker
                worker.start()
