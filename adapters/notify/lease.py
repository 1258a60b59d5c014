"""Sink leases beside the log: which controller delivers to a sink now (one at a time per sink).

Times come from the database's clock, as for claimant leases (service/leases.py); the table and its
statements are the store's (adapters/store/leases.py). A lease lasts more than twice the HTTP timeout,
and is renewed before a send when less than a timeout is left, so a holder's send ends before anyone
else may take the sink over.
"""

from __future__ import annotations

import time

from .. import settings
from ..store.leases import SinkTable
from ..store.port import LogRecorder


def lease_seconds(timeout: float) -> float:

    return max(settings.notify_lease_seconds(), 2 * timeout + 3)  # a send (timeout + 1) always fits after a renewal


class SinkLeases:
    def __init__(self, recorder: LogRecorder, holder: str, seconds: float) -> None:
        self.holder = holder
        self.seconds = seconds
        self.held: dict[str, float] = {}  # sink -> monotonic time our lease surely lasts until
        self.table = SinkTable(recorder.beside)

    def hold(self, sink: str, needed: float) -> bool:
        """Whether we hold `sink`'s lease for at least `needed` more seconds (taking or renewing it)."""
        if self.held.get(sink, 0.0) - time.monotonic() >= needed:
            return True
        started = time.monotonic()
        self.table.take(sink, self.holder, self.seconds)
        holder = self.table.holder(sink)
        if holder != self.holder:
            self.held.pop(sink, None)
            return False
        self.held[sink] = started + self.seconds - 1.0  # a second of margin for clocks and commit time
        return self.held[sink] - time.monotonic() >= needed

    def release(self, sink: str) -> None:
        self.held.pop(sink, None)
        self.table.release(sink, self.holder)
