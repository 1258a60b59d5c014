"""The freezes in the log (of a config, or of all): one table that the desired and history views both keep."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..domain import freeze_rules as freezes
from ..domain import ids
from .projection import StatementSink
from .records import Record
from .rows import Table

if TYPE_CHECKING:
    import sqlite_utils

CREATE = """
CREATE TABLE IF NOT EXISTS freezes (stream TEXT PRIMARY KEY, scope TEXT, frozen INTEGER, by TEXT, reason TEXT,
    until TEXT, at TEXT)
"""
COLUMNS = ("stream", "scope", "frozen", "by", "reason", "until", "at")
KINDS = {"config": "config", "freeze": "all"}  # the stream's kind -> the freeze's scope
TYPES = frozenset({"Frozen", "Unfrozen"})
ALL_STREAM = str(freezes.ALL_ID)
IN_LOG = "SELECT stream, scope, by, reason, until, at FROM freezes WHERE frozen = 1"


def wants(kind: str, type_: str) -> bool:
    return kind in KINDS and type_ in TYPES


class FreezeTable:
    """The freeze rows a fold changes, by stream (a config's, or the freeze of all's)."""

    def __init__(self, conn: StatementSink) -> None:
        self.table = Table(conn, "freezes", COLUMNS, "stream")

    def apply(self, r: Record) -> None:
        if r.type == "Frozen":
            meta = r.data.get("meta") or {}
            row = {"by": meta.get("actor"), "reason": r.data["reason"], "until": r.data["until"], "at": r.timestamp}
            self.table.put({"stream": r.stream, "scope": KINDS[r.kind], "frozen": 1, **row})
        else:
            self.table.put(dict.fromkeys(COLUMNS) | {"stream": r.stream, "scope": KINDS[r.kind], "frozen": 0})

    def flush(self) -> None:
        self.table.flush()


def create(db: sqlite_utils.Database) -> None:
    db.execute(CREATE)


def recorded(db: sqlite_utils.Database) -> dict[str, dict[str, Any]]:
    """Every freeze the log has not lifted, by stream (in force or expired: see `in_force_for`)."""
    return {row["stream"]: row for row in db.query(IN_LOG)}


def in_force_for(name: str, recorded: Mapping[str, Mapping[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """The freezes of config `name` in force at `now` (its own first, then the freeze of all)."""
    found = []
    for stream in (str(ids.config_id(name)), ALL_STREAM):
        row = recorded.get(stream)
        if row is not None and freezes.in_force(dict(row), now):
            found.append({k: row[k] for k in ("scope", "by", "reason", "until", "at")})
    return found
