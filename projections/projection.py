"""The shape every read model has: a name, a version, its tables, and a batch fold."""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from .records import Record, UndecodableEvent
from .source import DirectLog, EventSource

if TYPE_CHECKING:
    import sqlite_utils

# Rows a fold keeps between batches; past this many it forgets them (they are written). A rebuild's fold
# checks at each flush (fold_files.FLUSH, 100,000 positions: ~10,000 deployments' rows), so it keeps the
# rows touched in the last two flushes or so, whatever the log's length (250,000 kept all of a 2M log's).
CACHE_ROWS = 20_000
Progress = Callable[[int, int], None]  # told (position reached, head) as a long fold goes


class StatementSink(Protocol):
    """Where a fold sends its statements: an sqlite3 connection, or a writer that runs its writes later, in order.

    Reads (`execute`) see every write sent before them."""

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> sqlite3.Cursor: ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> object: ...


class Fold(ABC):
    """Folds batches into one projection file, remembering the rows it has read or written.

    What it remembers is only right while nothing else writes the file: use one fold per
    transaction, or per file that no other connection writes (a rebuild's)."""

    reads_itself: ClassVar[bool] = False  # True: wants no record at all, it reads the log itself

    def wants(self, kind: str, type_: str) -> bool:
        """Whether `apply` looks at events of this kind and type at all (the others may be left out)."""
        return True

    def needs_data(self, kind: str, type_: str) -> bool:
        """Whether `apply` reads the `data` of the events of this kind and type it wants (a rebuild may
        hand it records whose data is left empty otherwise: type, stream and timestamp are always there)."""
        return True

    def from_zero(self) -> None:  # noqa: B027 - a fold that reads no row back has nothing to do here
        """The file is new and empty, and only this fold writes it (a rebuild's): a row the fold has not
        put is not there (see rows.Table.from_zero)."""

    @abstractmethod
    def apply(self, records: Sequence[Record]) -> None:
        """Fold `records` (in order, after the tracked position); `flush` sends what is still unwritten."""

    def reached(self, position: int) -> None:  # noqa: B027 - most folds have nothing to do here
        """Every event up to `position` has been offered to `apply` (those it wants)."""

    @abstractmethod
    def flush(self) -> None:
        """Send every row changed since the last flush to the sink."""

    def finish(self) -> None:
        """The last flush of a rebuild."""
        self.flush()

    def close(self) -> None:  # noqa: B027 - most folds hold nothing
        """Let go of what the fold holds, whether or not it finished."""


class Projection(ABC):
    """A deterministic fold of records into tables. Bump `version` when the code changes."""

    name: ClassVar[str]
    version: ClassVar[int]
    tables: ClassVar[tuple[str, ...]]
    page_size: ClassVar[int] = 4096  # bytes per page of a new file (SQLite's default)

    @abstractmethod
    def create(self, db: sqlite_utils.Database) -> None:
        """Create the tables and indexes (called inside the first transaction)."""

    @abstractmethod
    def fold(self, conn: StatementSink) -> Fold:
        """A fold into the file behind `conn`, for the batches of one transaction (or of one private file)."""

    def fold_from_zero(
        self, db: sqlite_utils.Database, conn: StatementSink, source: EventSource, head: int, log: DirectLog
    ) -> Fold:
        """A fold of all of `source` (to `head` and a little past) into `db`, new and private, written
        through `conn`; `log` is where the rebuild may read the log itself (an SQLite file, a PostgreSQL table)."""
        fold = self.fold(conn)
        fold.from_zero()
        return fold

    def apply(self, db: sqlite_utils.Database, records: Sequence[Record]) -> None:
        """Fold `records` (all after the tracked position, in order) into the tables."""
        fold = self.fold(db.conn)
        fold_batch(fold, records)
        fold.flush()


# What a fold raises on a document that is JSON, yet not the event's: a field missing, or of another type
# (a number where text is read, a timestamp that does not parse).
NOT_THE_EVENTS = (KeyError, ValueError, TypeError, AttributeError, IndexError)


def fold_batch(fold: Fold, records: Sequence[Record]) -> None:
    """`fold.apply(records)`: where every batch of the log is folded, so that an event whose document
    lacks what a fold reads is named as damage to the log (UndecodableEvent, exit 5), not a crash. The
    position is looked up only then, in the failing frames (no try per event, none in each handler)."""
    try:
        fold.apply(records)
    except NOT_THE_EVENTS as error:
        raise UndecodableEvent(_failing(error, records), error) from error


def _failing(error: BaseException, records: Sequence[Record]) -> str:
    """The event being folded when `error` was raised: the innermost record a failing frame held (a fold
    walks its batch with one in hand), else the batch's range."""
    found = None
    tb = error.__traceback__
    while tb is not None:
        found = next((v for v in tb.tb_frame.f_locals.values() if type(v) is Record), found)
        tb = tb.tb_next
    if found is not None:
        return f"the event at position {found.position}"
    return f"an event at positions {records[0].position}..{records[-1].position}" if records else "an event"
