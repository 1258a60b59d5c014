"""A view as the log stood at a position: one config's streams, folded into a private in-memory copy.

`--as-of` answers with the same queries as the live view, over this copy: the live views are never
touched, and only the config's own events are read (an index lookup per stream), not the whole log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from uuid import UUID

import sqlite_utils

from ..domain import ids
from ..domain.freeze_rules import ALL_ID
from .history import History
from .records import Notification, decode

EventsOf = Callable[[Sequence[UUID], int], Sequence[Notification]]  # streams, position -> their events up to it


def history_at(notifications: Iterable[Notification]) -> sqlite_utils.Database:
    """The history view of exactly these events (one config's, up to a position, in position order)."""
    db = sqlite_utils.Database(memory=True)
    view = History()
    view.create(db)
    view.apply(db, [decode(n) for n in sorted(notifications, key=lambda n: n.id)])
    return db


def config_history_at(events_of: EventsOf, name: str, position: int) -> sqlite_utils.Database:
    """The history view of config `name` as the log stood at `position`: its stream and the freeze of all's,
    then its deployments'."""
    config = ids.config_id(name)
    own = events_of([config, ALL_ID], position)
    revisions = max(
        (decode(n).data.get("revision") or 0 for n in own if n.topic.endswith(".RolloutTriggered")), default=0
    )
    deployments = events_of([ids.deployment_id(config, r) for r in range(1, revisions + 1)], position)
    return history_at([*own, *deployments])
