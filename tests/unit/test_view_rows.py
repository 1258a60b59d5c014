"""A fold's rows (projections.rows.Table) over a rebuild's new file: how many it keeps, and what it reads back."""

from __future__ import annotations

import gc
import sqlite3
import tracemalloc

from rollouts.projections.rows import Table

COLUMNS = ("stream", "phase")


class Counting:
    """An sqlite3 connection that counts the reads a Table sends it (each waits for a rebuild's writes)."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute("CREATE TABLE deployments (stream TEXT PRIMARY KEY, phase TEXT)")
        self.reads = 0

    def execute(self, sql: str, parameters: tuple[object, ...] = (), /) -> sqlite3.Cursor:
        self.reads += sql.startswith("SELECT")
        return self.conn.execute(sql, parameters)

    def executemany(self, sql: str, rows: object, /) -> object:
        return self.conn.executemany(sql, rows)  # type: ignore[arg-type]


def test_a_rebuilds_table_keeps_a_bounded_number_of_rows_and_reads_back_only_those_it_forgot() -> None:
    """A rebuild's fold kept every row it had seen up to 250,000 a table: its process grew with the log (~330 bytes
    an event). It keeps the rows of the last flushes or so now, however many are put (300,000 here: a 3M-event
    log's deployments, ~10,000 each flush of 100,000 positions); a row it forgot is read back, and a key never
    put (each Created asks for its stream first) is known missing without a read."""
    sink = Counting()
    table = Table(sink, "deployments", COLUMNS, "stream")
    table.from_zero()
    flushes, per_flush, kept = 30, 10_000, 40_000
    for f in range(flushes):
        for i in range(per_flush):
            key = f"d-{f}-{i}"
            assert table.get(key) is None  # a new stream: known missing
            table.put({"stream": key, "phase": "New"})
        table.flush()
        assert len(table.rows) + len(table.older) <= kept
    assert sink.reads <= 5  # (the forgotten keys' filter says yes to ~1 new key in 400,000 here: then a read)
    before = sink.reads
    assert table.get("d-0-0") == {"stream": "d-0-0", "phase": "New"}  # forgotten long ago: read back
    assert table.get("d-0-0") == {"stream": "d-0-0", "phase": "New"}  # and kept again
    assert sink.reads == before + 1
    assert table.get("never") is None


def test_what_a_rebuilds_table_remembers_of_forgotten_rows_does_not_grow_with_them() -> None:
    """The keys of forgotten rows were kept in a set (~100 bytes a key: tens of MiB a million events, the
    rebuild's worker growing with the log); a filter of them takes the same few MiB at 100,000 keys as at
    400,000, and still tells each forgotten key from a new one."""
    table = Table(Counting(), "deployments", COLUMNS, "stream")
    table.from_zero()

    def put(first: int, count: int) -> int:
        gc.collect()
        tracemalloc.start()
        try:
            for i in range(first, first + count):
                table.put({"stream": f"d-{i}", "phase": "New"})
                if i % 10_000 == 0:
                    table.flush()
            return tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()

    put(0, 100_000)
    grown = put(100_000, 300_000)  # 300,000 more forgotten keys: ~30 MiB in a set
    assert grown < 8 * 2**20, f"{grown / 2**20:.1f} MiB more for 300,000 more forgotten keys"
    assert table.get("d-5") == {"stream": "d-5", "phase": "New"}
