"""Reading the audit view (projections/audit_view.py): events filtered, and what `audit` checks, as plain rows."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..domain.audit_rules import TYPES, RuleEvent
from ..domain.errors import NotFound
from ..domain.freeze_rules import ALL_ID
from .records import UndecodableEvent, document, fields
from .rows import ViewRow

if TYPE_CHECKING:
    import sqlite_utils


@dataclass(frozen=True)
class EventFilter:
    """Which events to list: each field that is not None narrows the list (`since` is an ISO time in UTC)."""

    config: str | None = None
    revision: int | None = None
    type: str | None = None
    actor: str | None = None
    since: str | None = None
    after: int | None = None  # positions above this
    until: int | None = None  # positions up to this
    limit: int | None = None  # the first this many


def require_config(db: sqlite_utils.Database, name: str) -> None:
    """NotFound unless the log has a config `name`."""
    if not db.execute("SELECT 1 FROM streams WHERE kind = 'config' AND config = ?", (name,)).fetchone():
        raise NotFound(f"config {name!r} not found")


def require_revision(db: sqlite_utils.Database, name: str, revision: int) -> None:
    """NotFound unless config `name` has a deployment `revision` in the log (as `rollout history` says)."""
    require_config(db, name)
    sql = "SELECT 1 FROM streams WHERE kind = 'deployment' AND config = ? AND revision = ?"
    if not db.execute(sql, (name, revision)).fetchone():
        raise NotFound(f"config {name!r} has no revision {revision}")


def has_type(db: sqlite_utils.Database, type_: str) -> bool:
    """Whether any event of the view has type `type_` (one index probe)."""
    return db.execute("SELECT 1 FROM events WHERE type = ? LIMIT 1", (type_,)).fetchone() is not None


def last_of_types(
    db: sqlite_utils.Database, name: str, types: tuple[str, ...], until: int | None = None
) -> dict[str, Any] | None:
    """The last event of config `name` whose type is one of `types` (up to position `until`), as the view's
    row (its `data` undecoded); None when there is none."""
    marks = ", ".join("?" * len(types))
    sql = f"SELECT position, type, actor, timestamp, data FROM events WHERE config = ? AND type IN ({marks})"
    args: list[Any] = [name, *types]
    if until is not None:
        sql += " AND position <= ?"
        args.append(until)
    last = list(db.query(sql + " ORDER BY position DESC LIMIT 1", args))
    return last[0] if last else None


def events(db: sqlite_utils.Database, only: EventFilter) -> list[ViewRow]:
    """The events `only` lets through, in log order, with `data` decoded and who ran the command (`os_user`,
    and on PostgreSQL the database role, `db_user`)."""
    if only.config is not None and only.revision is not None:
        require_revision(db, only.config, only.revision)
    elif only.config is not None:
        require_config(db, only.config)
    clauses, args = [], []
    for column, value in (
        ("config", only.config),
        ("revision", only.revision),
        ("type", only.type),
        ("actor", only.actor),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    for clause, value in (("timestamp >= ?", only.since), ("position > ?", only.after), ("position <= ?", only.until)):
        if value is not None:
            clauses.append(clause)
            args.append(value)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    page = f" LIMIT {int(only.limit)}" if only.limit is not None else ""
    rows = list(db.query(f"SELECT * FROM events {where} ORDER BY position{page}", args))
    for row in rows:
        try:
            row["data"] = document(row["data"])[1]
            meta = row["data"].get("meta") or {}
            row["os_user"] = meta.get("os_user")  # null for events written before it
            row["db_user"] = meta.get("db_user")  # null on SQLite, and for events written before it
        except (ValueError, KeyError, TypeError, AttributeError) as error:  # JSON, yet not an event's document
            raise UndecodableEvent(f"the event at position {row['position']}", error) from None
    return rows


def rule_events(db: sqlite_utils.Database, name: str | None = None) -> Iterator[RuleEvent]:
    """Every event a rule of `audit` reads (domain/audit_rules), in log order, each decoded once: a
    deployment's events and the other types the rules name (of config `name`, and the freezes of all)."""

    # Whether an event is a deployment's: SQLite makes an index of the deployments' streams once and probes it
    # per event. Joining `streams` for every event searched two b-trees (its key's index, then its row), 3 of
    # the 4 s of CPU this query took at 1M events; a Python set of the streams took as long as this, and
    # ~190 bytes a deployment of the audit's memory (19 MiB a million events).
    deployment = "stream IN (SELECT stream FROM streams WHERE kind = 'deployment')"
    sql = f"SELECT position, type, config, revision, timestamp, data, stream, {deployment} FROM events"
    args: list[Any] = []
    if name:
        sql += " WHERE (config = ? OR stream = ?)"
        args += [name, str(ALL_ID)]
    every = str(ALL_ID)
    others = frozenset(TYPES)
    read = fields  # no rule reads the timestamp, topic or config_id `document` reshapes
    rows = db.execute(sql + " ORDER BY position", args)
    for position, type_, config, revision, at, data, stream, of_deployment in rows:
        if of_deployment:  # plain tuples: a RuleEvent made for each of 1M events cost 0.7 s
            yield (position, type_, config, revision, at, read(data), True)
        elif type_ in others:
            yield (position, type_, None if stream == every else config, None, at, read(data), False)


def at(events: Iterator[RuleEvent]) -> int | None:
    """The position of the event `rule_events` gave last (a rule that failed on it: which event it was)."""
    frame = getattr(events, "gi_frame", None)
    return None if frame is None else frame.f_locals.get("position")


def upstreams(db: sqlite_utils.Database) -> frozenset[str]:
    """Every config a stage policy in a spec of the view names as its upstream (a config's Registered or
    SpecChanged, a deployment's Created): the deployments the stage check (I11) folds."""
    # Only documents that hold the key are parsed (a few in a log of stages, none in one without): the
    # log's documents are written by the library's encoder, which writes the key as it is; an edited
    # document breaks the chain (I8), and one whose key were escaped would only make a promotion from
    # that config reported, never hide one.
    sql = (
        "SELECT DISTINCT CASE WHEN json_valid(data) THEN json_extract(data, '$.spec.upstream') END FROM events"
        " WHERE type IN ('Registered', 'SpecChanged', 'Created') AND instr(data, '\"upstream\"') > 0"
    )
    return frozenset(str(u) for (u,) in db.execute(sql) if u)


def event_count(db: sqlite_utils.Database, name: str | None = None) -> int:
    """How many events the view holds (about config `name`)."""
    sql = "SELECT count(*) FROM events" + (" WHERE config = ?" if name else "")
    return int(db.execute(sql, [name] if name else []).fetchone()[0])


def last_position_at(db: sqlite_utils.Database, moment: str) -> int:
    """The highest position whose event is at or before `moment` (UTC ISO): timestamps are not in position order."""
    return int(db.execute("SELECT max(position) FROM events WHERE timestamp <= ?", (moment,)).fetchone()[0] or 0)
