"""The rows of one table as a fold knows them: read once, changed in memory, written back in batches."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from projections.projection import CACHE_ROWS, Sink

Row = dict[str, Any]


class Table:
    """Rows by key. A fold marks what it changes with `changed`; `flush` writes those, in that order."""

    def __init__(self, conn: Sink, table: str, columns: tuple[str, ...], key: str) -> None:
        self.conn = conn
        self.columns = columns
        self.key = key
        self.rows: dict[Any, Row | None] = {}  # None: known to be missing
        self.changed: dict[Any, Row] = {}
        self.select = f"SELECT {', '.join(columns)} FROM {table} WHERE {key} = ?"
        self.upsert = f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        self.values = itemgetter(*columns)

    def get(self, key: Any) -> Row | None:
        rows = self.rows
        if key in rows:
            return rows[key]
        found = self.conn.execute(self.select, (key,)).fetchone()
        rows[key] = row = dict(zip(self.columns, found, strict=True)) if found else None
        return row

    def put(self, row: Row) -> None:
        """A new row, or one that replaces what was there."""
        key = row[self.key]
        self.rows[key] = self.changed[key] = row

    def flush(self) -> None:
        """Write the changed rows; forget everything once more than CACHE_ROWS are known (all is written)."""
        if self.changed:
            self.conn.executemany(self.upsert, list(map(self.values, self.changed.values())))
            self.changed.clear()
        if len(self.rows) > CACHE_ROWS:
            self.rows.clear()
