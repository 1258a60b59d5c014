"""The claim check's reads of the log, each a statement in the store's dialect on one Snapshot (what
makes a claim hold is decided in service/claims.py and domain/fencing.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .leases import CLAIMANTS
from .port import LOG_TABLE

if TYPE_CHECKING:
    from .port import Snapshot


def event_at(look: Snapshot, position: int) -> tuple[Any, ...] | None:
    """(stream, topic) of the event at `position` (None: the log holds none there)."""
    m = look.mark
    found = look.query(f"SELECT originator_id, topic FROM {look.events} WHERE {look.position} = {m}", (position,))
    return found[0] if found else None


def stream_events(look: Snapshot, stream: object) -> list[tuple[Any, ...]]:
    """(position, topic, state) of each of `stream`'s events, in its order."""
    m = look.mark
    sql = (
        f"SELECT {look.position}, topic, state FROM {look.events} WHERE originator_id = {m} ORDER BY originator_version"
    )
    return look.query(sql, (stream,))


def own_log_id(look: Snapshot) -> str:
    """The id this log keeps of itself ("" when it keeps none)."""
    own = look.query(f"SELECT log_id FROM {look.table(LOG_TABLE)}", ())
    return own[0][0] if own else ""


def states_of(look: Snapshot, topic: str) -> list[Any]:  # why: each state's text as the driver gives it
    """The stored states of the events whose topic is LIKE `topic`, in the log's order of reading."""
    sql = f"SELECT state FROM {look.events} WHERE topic LIKE {look.mark}"
    return [state for (state,) in look.query(sql, (topic,))]


def live_leases(look: Snapshot, seconds: Callable[[], float]) -> dict[str, bool]:
    """Each claimant's lease: whether it has not expired by the database's clock (its own length, or
    `seconds()`, read only once there is a table, for a row made before leases kept theirs)."""
    if not look.has_table(CLAIMANTS):
        return {}
    m = look.mark
    sql = f"SELECT claimant, {look.now} - renewed_at <= coalesce(seconds, {m}) FROM {look.table(CLAIMANTS)}"
    return {claimant: bool(live) for claimant, live in look.query(sql, (seconds(),))}
