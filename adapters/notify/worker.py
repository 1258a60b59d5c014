"""Delivering to one sink: in log order, one change at a time, each recorded before the next is sent."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import IntegrityError

from ...domain.errors import DomainError
from ...domain.notification import Change
from ..service import sinks
from ..service.moves import check_unsealed, log_ids_by_position
from ..store.log_recorder import LogSealed
from .changes import ChangeReader
from .http import Poster

if TYPE_CHECKING:
    from ...domain.sink import Sink
    from ..service.application import RolloutsApp
    from .lease import SinkLeases

POLL_S = 0.02  # how often an idle worker looks at the log's head
MAX_DELAY_S = 10.0


def retry_delay(failures: int) -> float:
    """Seconds before the next try after `failures` failures in a row: 0.5, 1, 2, 4, 8, then 10."""
    return min(MAX_DELAY_S, 0.5 * 2 ** (failures - 1))


class Worker(threading.Thread):
    """One sink's deliveries. Only while it holds the sink's lease does it send; after each 2xx it
    appends NotificationDelivered at the sink's next version, so when another controller delivered
    meanwhile the append conflicts and this worker re-reads before sending anything else."""

    def __init__(
        self,
        app: RolloutsApp,
        name: str,
        leases: SinkLeases,
        meta: Callable[[], dict[str, Any]],
        stopping: threading.Event,
        log: Callable[[str], None],
        delivered: Callable[[Change], None] | None = None,
    ) -> None:
        super().__init__(name=f"notify-{name}", daemon=True)
        self.app, self.sink_name, self.leases, self.meta = app, name, leases, meta
        self.stopping, self.log = stopping, log
        self.on_delivered = delivered or (lambda _: None)
        self.reader = ChangeReader(app.recorder)
        self.poster = Poster()
        self.memo = (-1, 0)  # (sink.delivered, scanned up to): positions after it hold nothing for the sink
        self.caught_up = -1  # the head of the last round that found nothing to send
        self.failing: str | None = None  # the error of the send that waits for a retry
        self.standby = False  # another controller holds the sink's lease

    def busy(self) -> bool:
        """Whether changes may wait for this worker: not when its sink is failing; yes while another
        controller holds the sink's lease, until that one has sent them or its lease ran out."""
        if not self.is_alive() or self.failing:
            return False
        return self.caught_up < self.reader.head()

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    progressed = self._round()
                except LogSealed as sealed:
                    # The log moved: the log it was imported into sends its changes again from the seal, under
                    # its own key. Sending here would repeat the change in flight without end (each record of it
                    # refused), so every worker of this controller stops (the controller exits at its next pass).
                    self.log(f"notify {self.sink_name}: {sealed}; sending stops")
                    self.stopping.set()
                    return
                except (IntegrityError, DomainError):
                    continue  # the sink changed under us: read it again
                except Exception as error:  # noqa: BLE001 - the store may be back soon; a worker never dies of it
                    self.log(f"notify {self.sink_name}: {type(error).__name__}: {error}; retrying")
                    self.stopping.wait(1.0)
                    continue
                if progressed is None:
                    return
                if not progressed:
                    self.stopping.wait(POLL_S)
        finally:
            self.poster.close()

    def release(self) -> None:
        with contextlib.suppress(Exception):  # noqa: BLE001 - an unreleased lease only expires later
            self.leases.release(self.sink_name)

    def _round(self) -> bool | None:
        """Send what waits; None once the sink is gone, else whether anything happened."""
        head = self.reader.head()
        if head == self.caught_up:
            return False  # nothing new in the log (the sink's own changes included): one cheap query
        sink = sinks.sink_of(self.app, self.sink_name)
        if sink is None or sink.removed:
            self.release()
            return None
        after = max(sink.delivered, self.memo[1] if self.memo[0] == sink.delivered else 0)
        if after >= head:
            self.caught_up = head
            return False
        if not self.leases.hold(self.sink_name, self.poster.timeout + 1):
            self.standby = True
            return False
        self.standby = False
        check_unsealed(self.app.recorder)  # once a round: no send starts on a sealed log
        for change in self.reader.changes(after, head):
            if sink.wants(change.kind, change.config) and not self._deliver(sink, change):
                return True
            self.memo = (sink.delivered, change.position)
        self.memo = (sink.delivered, head)
        self.caught_up = head
        return True

    def _deliver(self, sink: Sink, change: Change) -> bool:
        """Send `change` until the sink answers 2xx, and record it; False when this worker must re-read first."""
        failures = 0
        while not self.stopping.is_set():
            if not self.leases.hold(self.sink_name, self.poster.timeout + 1):
                return False
            try:
                url = sinks.resolved(sink.url, os.environ)  # --url-env: read at each delivery, never logged
            except sinks.BadURL as bad:
                error: str | None = str(bad)
            else:
                key = change.key(
                    log_ids_by_position(self.app)(change.position), self.sink_name
                )  # asked again: a rebind renames
                error = self.poster.post(url, change.document(), key)
            if error is None:
                sink.deliver(change.position, self.meta())
                self.app.save(sink)  # IntegrityError: another controller recorded it first
                self.failing = None
                self.on_delivered(change)
                return True
            failures += 1
            self.failing = error
            if sink.fail(change.position, error, self.meta()):
                self.log(f"notify {self.sink_name}: position {change.position}: {error}; retrying")
                self.app.save(sink)
            if self.stopping.wait(retry_delay(failures)):
                return False
            fresh = sinks.sink_of(self.app, self.sink_name)
            if fresh is None or fresh.version != sink.version:
                return False  # removed, added again, or delivered by another controller
        return False
