"""The stages in the log (DESIGN 7.10): which config takes its artifact from which, and whether the controller
promotes it by itself. A table the desired view keeps, so that the controller finds its auto stages cheaply."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .projection import StatementSink
from .records import Record
from .rows import Table

if TYPE_CHECKING:
    import sqlite_utils

CREATE = "CREATE TABLE IF NOT EXISTS stages (stream TEXT PRIMARY KEY, name TEXT, upstream TEXT, promote TEXT)"
COLUMNS = ("stream", "name", "upstream", "promote")
TYPES = frozenset({"Registered", "SpecChanged"})
AUTO = "SELECT name, upstream FROM stages WHERE upstream IS NOT NULL AND promote = 'auto' ORDER BY name"
# The controller runs AUTO every pass, and the table holds a row per config: without this index each pass
# scanned every config (figure 11's idle pass, 10k configs against 100: 2-3x). The index holds only the auto
# stages, in AUTO's order.
AUTO_INDEX = "CREATE INDEX IF NOT EXISTS stages_auto ON stages (name) WHERE upstream IS NOT NULL AND promote = 'auto'"


def wants(kind: str, type_: str) -> bool:
    return kind == "config" and type_ in TYPES


def create_table(db: sqlite_utils.Database) -> None:
    db.execute(CREATE)
    db.execute(AUTO_INDEX)


class StageTable:
    """A row per config (its name from its Registered event), with its upstream (NULL: no stage)."""

    def __init__(self, conn: StatementSink) -> None:
        self.table = Table(conn, "stages", COLUMNS, "stream")

    def from_zero(self) -> None:
        self.table.from_zero()

    def apply(self, r: Record) -> None:
        spec = r.data.get("spec") or {}
        row = self.table.get(r.stream)
        name = r.data.get("name") if r.type == "Registered" else (row or {}).get("name")
        if r.type == "SpecChanged" and row is None and not spec.get("upstream"):
            return  # (no stage, and never one: no row needed)
        upstream = spec.get("upstream") or None
        self.table.put({"stream": r.stream, "name": name, "upstream": upstream, "promote": spec.get("promote")})

    def flush(self) -> None:
        self.table.flush()
