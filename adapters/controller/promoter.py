"""The controller's automatic promotions (DESIGN 7.10): each pass, every auto stage the desired view lists is
promoted from its upstream's newest eligible revision, decided on the aggregates (service/promotion.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ...domain.errors import DomainError, NotFound
from ...projections import stages
from ...projections.store import ProjectionStore
from ..service import promotion
from ..service.application import RolloutsApp, WriteConflict


class Promoter:
    """Promotes the auto stages. An upstream revision that soaks keeps no `--until-idle` controller running
    (as a freeze does not): it is promoted by the first pass after its soak."""

    def __init__(self, app: RolloutsApp, meta: Callable[[], dict[str, Any]], log: Callable[[str], None]) -> None:
        self.app = app
        self.meta = meta
        self.log = log

    def run(self, projections: ProjectionStore) -> int:
        """One pass (`projections`: the controller's, its desired view caught up already): the promotions made.
        The clock is read here, after the pass's reports: an upstream revision that became Complete in them
        is eligible (soak 0) now."""
        now = datetime.now(UTC)
        made = 0
        try:
            auto = projections.query("desired", stages.AUTO)
        except sqlite3.OperationalError as error:  # a view frozen as an older version left it (no table)
            self.log(f"no promotions this pass: {error}")
            return 0
        for row in auto:
            name, upstream = str(row["name"]), str(row["upstream"])
            try:
                revision = promotion.auto_promote(self.app, name, self.meta(), now)
            except (WriteConflict, DomainError, NotFound) as error:
                self.log(f"skipped promotion of {name}: {error}")
                continue
            if revision is not None:
                made += 1
                self.log(f"promote {name} v{revision} from {upstream}")
        return made
