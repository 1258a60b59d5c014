"""A rebuild's writes, run in order by a thread of their own while the caller folds the next batch."""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from types import TracebackType
from typing import Any

# SQLite takes at most 32,766 parameters per statement. Many rows per statement means the
# thread takes the GIL once per statement, not once per row (sqlite3's executemany lets it
# go around every row, and a thread that wants it back waits for the other's switch interval).
PARAMETERS = 32_766
ROWS = 128  # at most: a statement of many rows takes longer to prepare than to run
DEPTH = 1024  # statements queued before the caller waits: a flush of many rows need not wait for SQLite

Item = tuple[sqlite3.Connection, str | Callable[[sqlite3.Connection], None], list[Any]] | None


class WriterError(RuntimeError):
    """A write failed in the writer's thread (the cause is chained)."""


class Writer:
    """Runs INSERTs for several connections in one thread, in the order given; any read waits for them.

    Use it as a context manager inside the connections' transactions: on leaving, the writes are
    done (or, after an error, abandoned) and the thread has ended, so COMMIT or ROLLBACK is safe.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue[Item] = queue.Queue(DEPTH)
        self._failed: BaseException | None = None
        self._abandon = False
        self._thread = threading.Thread(target=self._run, name="projections-writer", daemon=True)
        self._statements: dict[tuple[str, int], str] = {}

    def __enter__(self) -> Writer:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop(abandon=kind is not None)

    def start(self) -> None:
        self._thread.start()

    def stop(self, abandon: bool) -> None:
        """End the thread once the queued writes are done (or, if `abandon`, once the current one is).

        Raises what a write raised, unless abandoning."""
        if not self._thread.is_alive():
            return
        self._abandon = abandon
        self._queue.put(None)
        self._thread.join()
        if not abandon:
            self._check()

    def sink(self, conn: sqlite3.Connection) -> WriterSink:
        return WriterSink(self, conn)

    def insert(self, conn: sqlite3.Connection, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Queue `sql` for each of `rows`, in order; an INSERT ... VALUES (?, ...) goes many rows at once."""
        self._check()
        rows = list(rows)
        if not rows:
            return
        if "VALUES" not in sql:
            for parameters in rows:
                self._queue.put((conn, sql, list(parameters)))
            return
        most = min(ROWS, 1 << ((PARAMETERS // len(rows[0])).bit_length() - 1))
        start = 0
        while start < len(rows):
            # Chunks of a power of two rows: a few statements, each prepared once (a big one
            # costs far more to prepare than to run).
            size = min(most, 1 << ((len(rows) - start).bit_length() - 1))
            chunk = rows[start : start + size]
            self._queue.put((conn, self._statement(sql, size), list(chain.from_iterable(chunk))))
            start += size

    def call(self, conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], None]) -> None:
        """Queue `work(conn)`, to run in the writer's thread in its turn."""
        self._check()
        self._queue.put((conn, work, []))

    def wait(self) -> None:
        """Return once every queued write is done."""
        self._queue.join()
        self._check()

    def _statement(self, sql: str, rows: int) -> str:
        """`sql` with its VALUES tuple repeated for `rows` rows."""
        found = self._statements.get((sql, rows))
        if found is None:
            head, _, values = sql.rpartition("VALUES")
            found = self._statements[sql, rows] = f"{head}VALUES {','.join([values.strip()] * rows)}"
        return found

    def _check(self) -> None:
        if self._failed is not None:
            raise WriterError("a projection write failed") from self._failed

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._failed is None and not self._abandon:
                    conn, sql, parameters = item
                    if callable(sql):
                        sql(conn)
                    else:
                        conn.execute(sql, parameters)
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread by _check
                self._failed = e
            finally:
                self._queue.task_done()


class WriterSink:
    """A StatementSink over one connection whose writes go through a Writer."""

    def __init__(self, writer: Writer, conn: sqlite3.Connection) -> None:
        self.writer = writer
        self.conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> sqlite3.Cursor:
        self.writer.wait()
        return self.conn.execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> None:
        self.writer.insert(self.conn, sql, seq_of_parameters)
