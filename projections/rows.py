"""The rows of one table as a fold knows them: read once, changed in memory, written back in batches."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from .key_filter import KeyFilter
from .projection import CACHE_ROWS, StatementSink

ViewRow = dict[str, Any]


class Table:
    """Rows by key. A fold marks what it changes with `changed`; `flush` writes those, in that order.

    At most about CACHE_ROWS rows are kept: those asked for or put since the last full flush, and the older.
    Of a table known whole (`from_zero`), the keys of the rows forgotten are kept (`forgotten`): only
    those are read back, a key never put is still known missing without a read."""

    def __init__(self, conn: StatementSink, table: str, columns: tuple[str, ...], key: str) -> None:
        self.conn = conn
        self.columns = columns
        self.key = key
        self.rows: dict[Any, ViewRow | None] = {}  # None: known to be missing
        self.older: dict[Any, ViewRow | None] = {}  # what `rows` held before it last filled up (see flush)
        self.complete = False  # every row of the table is known, or its key is in `forgotten`: see from_zero
        self.forgotten: KeyFilter | None = None  # (complete only) keys of rows written and no longer kept
        self.changed: dict[Any, ViewRow] = {}
        self.select = f"SELECT {', '.join(columns)} FROM {table} WHERE {key} = ?"
        self.upsert = f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        self.values = itemgetter(*columns)

    def get(self, key: object) -> ViewRow | None:
        rows = self.rows
        if key in rows:
            return rows[key]
        if key in self.older:  # the same object: what a fold changed in it was flushed or is marked changed
            rows[key] = row = self.older[key]
            return row
        if self.complete and (self.forgotten is None or key not in self.forgotten):
            rows[key] = None
            return None
        found = self.conn.execute(self.select, (key,)).fetchone()
        rows[key] = row = dict(zip(self.columns, found, strict=True)) if found else None
        return row

    def from_zero(self) -> None:
        """The table is new and empty, and only this fold writes it (a rebuild's private file): a row it
        does not know is missing, not to be read, unless it forgot it (a read waits for the writes queued)."""
        self.complete = True

    def put(self, row: ViewRow) -> None:
        """A new row, or one that replaces what was there."""
        key = row[self.key]
        self.rows[key] = self.changed[key] = row

    def flush(self) -> None:
        """Write the changed rows; once more than CACHE_ROWS / 2 are known, those become the older rows and
        the older ones are forgotten (all is written); of a table known whole, their keys are kept.

        Forgetting only the older half, not all: a row asked for again soon after is most often still
        known, and a row that is not must be read back, which waits for every write queued before it
        (a rebuild's writer): at 1M events, forgetting all stalled a rebuild's history fold ~1.1 s. Keeping
        the forgotten keys, not the rows: a rebuild's fold kept every deployment's and step's row it had seen
        (up to 250,000 a table, ~330 bytes an event in its process), growing with the log; a set of their
        keys still grew (~100 bytes a key); a KeyFilter of them does not, and a new key (each Created asks for
        its stream first) is still known missing unread (but about once in 10**8: then read, and not found)."""
        if self.changed:
            self.conn.executemany(self.upsert, list(map(self.values, self.changed.values())))
            self.changed.clear()
        if len(self.rows) > CACHE_ROWS // 2:
            if self.complete:
                rows = self.rows
                if self.forgotten is None:
                    self.forgotten = KeyFilter()
                self.forgotten.update(k for k, row in self.older.items() if row is not None and k not in rows)
            self.older = self.rows
            self.rows = {}
