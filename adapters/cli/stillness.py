"""`logs -f`'s watch for a deployment nothing moves: no event of it and no controller alive."""

from __future__ import annotations

import time
from collections.abc import Callable


class Stillness:
    """Says once, after `seconds` in which the deployment's row did not change and no controller
    renewed a lease (`lease_age`: seconds since the freshest renewal, None when none ever), that
    nothing is moving it; says it again only after something moved."""

    def __init__(
        self, seconds: float, lease_age: Callable[[], float | None], now: Callable[[], float] = time.monotonic
    ) -> None:
        self.seconds = seconds
        self.lease_age = lease_age
        self.now = now
        self.row: object = None
        self.moved = now()
        self.said = False

    def check(self, row: object) -> str | None:
        """What to say now, seeing `row` (the deployment as the history view has it), if anything."""
        t = self.now()
        if row != self.row:
            self.row, self.moved = row, t
        age = None
        if t - self.moved >= self.seconds:  # only then ask the store when a controller was last alive
            age = self.lease_age()
            if age is not None:
                self.moved = max(self.moved, t - age)
        if t - self.moved < self.seconds:
            self.said = False
            return None
        if self.said:
            return None
        self.said = True
        who = "no controller ever ran on this store" if age is None else f"no controller lease renewed for {age:.0f}s"
        return (
            f"nothing has touched this deployment for {t - self.moved:.0f}s (no event of it; {who});"
            " is `rollouts controller run` running?"
        )
