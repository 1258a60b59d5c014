"""The store port: what the SQLite and the PostgreSQL backends each do in their own dialect.

Callers hold a Backend (bootstrap makes it from `--store`) and the LogRecorder it opened, and never ask
which one it is: what differs between the two (leases' SQL, watching, reading the log) is asked of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias, TypeVar
from uuid import UUID

from ...domain.errors import StoreProblem
from ...projections.log_file import Row  # a notification as projections need it (one type for both)

if TYPE_CHECKING:
    from eventsourcing.persistence import Notification, StoredEvent

    from ...projections.source import DirectLog
    from .url import StoreURL

T = TypeVar("T")
Opened = TypeVar("Opened", bound="HasRecorder")  # what a backend's open_app makes
CHAIN_TABLE = "rollouts_chain"  # beside the log: each position's hash (adapters/store/log_recorder)
LOG_TABLE = "rollouts_log"  # beside the log: its id and its chain format
APP_NAME = "rollouts"  # RolloutsApp.name: the library reads its settings and names the log's tables after it

# A long-lived process (the controller) keeps aggregates and only reads their new events;
# every get() still fast-forwards from the store and hands out a copy, so nothing is stale.
CACHE = {"AGGREGATE_CACHE_MAXSIZE": "500", "AGGREGATE_CACHE_FASTFORWARD": "y"}


class StoreUnavailable(StoreProblem):
    """The store cannot be reached or used (the CLI exits 5)."""


class LeaseSQL(NamedTuple):
    """The pieces of lease statements that differ between dialects."""

    now: str  # the database's clock, in seconds since the epoch
    mark: str  # a parameter's placeholder
    greatest: str  # the larger of two values


Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


class Snapshot(NamedTuple):
    """A read-only look at the log with a connection of our own, in one snapshot, without the application
    (for `claim check`, which a deployer runs before each side effect: it must start fast)."""

    query: Query  # one statement (placeholders: `mark`) -> its rows
    events: str  # the events table, as a statement names it
    position: str  # its column of positions
    mark: str  # a parameter's placeholder
    now: str  # the database's clock, in seconds since the epoch
    has_table: Callable[[str], bool]  # whether a table beside the log exists
    table: Callable[[str], str]  # a table beside the log, as a statement names it


HashedRow = tuple[int, Any, int, str, bytes, str | None]  # position, stream, version, topic, state, hash
StreamEvents: TypeAlias = "Callable[[Sequence[UUID]], list[StoredEvent]]"  # some streams' events, in a transaction
# Events an import appends after the log's, given a reader of streams inside its transaction (log import --fork).
Tail: TypeAlias = "Callable[[StreamEvents], list[StoredEvent]]"


class Imported(NamedTuple):
    """An event of an imported log: where it stood in its log, and whether it was chained there."""

    position: int
    event: StoredEvent
    chained: bool


class EventRow(NamedTuple):
    """A stored event with its position, as projections decode it (records.Notification)."""

    id: int
    originator_id: str | UUID  # hex text from SQLite, a UUID from PostgreSQL (records.Notification takes both)
    originator_version: int
    topic: str
    state: bytes


@dataclass(frozen=True)
class Part:
    """Positions lo..hi of a log in a file, walked from `start` (the hash stored before lo) by the rule of the
    log's chain format `fmt`, by a process of its own (only SQLite's log is a file: sqlite/walk.py)."""

    db: str
    table: str
    lo: int
    hi: int
    start: str
    fmt: int


class SnapshotTable(Protocol):
    """The library's recorder of snapshots, as events_after reads its table."""

    @property
    def datastore(self) -> object: ...

    @property
    def events_table_name(self) -> str: ...


class Listener(Protocol):
    """Something that says when the log changed, with a descriptor to wait on."""

    fd: int

    def changed(self) -> bool: ...

    def close(self) -> None: ...


class Cursor(Protocol):
    """A cursor of the library's datastore, as statements beside the log use it (sqlite3's or psycopg's)."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> object: ...

    def fetchone(self) -> Any: ...  # why: a tuple, an sqlite3.Row or a dict, as the driver gives rows

    def fetchall(self) -> Sequence[Any]: ...


class Datastore(Protocol):
    """The library's datastore under a recorder: transactions on its pool of connections."""

    def transaction(self, *, commit: bool) -> AbstractContextManager[Cursor]: ...

    def close(self) -> None: ...


class Backend(Protocol):
    """One store: how to open it, and the statements and watches that differ between backends."""

    @property
    def store(self) -> StoreURL: ...

    shared: bool  # several hosts may share the log: claims need leases and heartbeats
    roles: bool  # the store has database roles: each event records its writer's (db_user, DESIGN 7.8)
    lease: LeaseSQL

    def shown(self) -> str:
        """The store as output may show it (never a password)."""
        ...

    def describe(self, error: BaseException) -> str:
        """One line about a storage error, with any password removed."""
        ...

    def env(self) -> dict[str, str]:
        """The eventsourcing library's environment for this store."""
        ...

    def open(self, construct: Callable[[dict[str, str]], T], reading: bool) -> T:
        """`construct(env)`, creating what is missing unless `reading` (then a store with no log is refused)."""
        ...

    def open_app(self, construct: Callable[[dict[str, str]], Opened]) -> Opened:
        """`construct(env)`, an application on the store, creating what is missing; its recorder is ours."""
        ...

    def open_recorder(self) -> LogRecorder:
        """Only the log's recorder, for reads: no application, no DDL; a store with no log is refused."""
        ...

    def has_log(self) -> bool:
        """Whether the store holds a log (True when it cannot tell: opening it then says why)."""
        ...

    def table(self, name: str) -> str:
        """A table of ours beside the log, as statements name it."""
        ...

    def create_table(self, datastore: Datastore, ddl: str) -> None:
        """Run a CREATE TABLE IF NOT EXISTS (or ALTER TABLE ... ADD COLUMN), safe beside another doing so."""
        ...

    def table_exists(self, datastore: Datastore, name: str) -> bool: ...

    def columns(self, datastore: Datastore, name: str) -> set[str]: ...

    def add_column(self, datastore: Datastore, name: str, column: str, kind: str) -> None:
        """Add a column, unless a process beside us just did."""
        ...

    def glance(self, after: int, topic: str, wait: float) -> list[bytes]:
        """The stored states of `topic`'s events after position `after`, read as cheaply as can be (for
        shell completion): nothing is created, no lock is waited for past `wait`; none from a server."""
        ...

    def snapshot(self) -> AbstractContextManager[Snapshot]:
        """A Snapshot of the log (StoreUnavailable when there is none, or it cannot be read)."""
        ...

    def undo_of_opening(self) -> Callable[[], None]:
        """Looked at before a log is opened to be filled (log import): a function that removes what the
        opening then made (the log's file, or the schema and its objects), for an import refused halfway.
        Call it with the store closed; it never raises."""
        ...


class TablesBeside:
    """Our tables beside the log (leases), in its dialect, on the log's own connections."""

    def __init__(self, backend: Backend, datastore: Datastore) -> None:
        self._backend = backend
        self._datastore = datastore
        self.lease = backend.lease

    def table(self, name: str) -> str:
        """A table of ours beside the log, as statements name it."""
        return self._backend.table(name)

    def create_table(self, ddl: str) -> None:
        """Run a CREATE TABLE IF NOT EXISTS (or ALTER TABLE ... ADD COLUMN), safe beside another doing so."""
        self._backend.create_table(self._datastore, ddl)

    def table_exists(self, name: str) -> bool:
        return self._backend.table_exists(self._datastore, name)

    def columns(self, name: str) -> set[str]:
        return self._backend.columns(self._datastore, name)

    def add_column(self, name: str, column: str, kind: str) -> None:
        """Add a column, unless a process beside us just did."""
        self._backend.add_column(self._datastore, name, column, kind)

    def transaction(self, *, commit: bool) -> AbstractContextManager[Cursor]:
        return self._datastore.transaction(commit=commit)


class LogRecorder(Protocol):
    """What the rest of the code uses of the log's recorder: the library's, chained (log_recorder.py), on
    SQLite or PostgreSQL; each satisfies this, and no caller asks which it is."""

    @property
    def events_table_name(self) -> str: ...

    @property
    def beside(self) -> TablesBeside:
        """Our tables beside the log (leases)."""
        ...

    def describe(self, error: BaseException) -> str:
        """One line about a storage error, with any password removed."""
        ...

    def close(self) -> None: ...

    # The library's reads

    def max_notification_id(self) -> int | None: ...

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]: ...

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]: ...

    # The chained log

    def log_id(self) -> str | None: ...

    def take_log_id(self, log_id: str) -> None: ...

    def chain_format(self) -> int: ...

    def sealed(self) -> int | None: ...

    def hash_at(self, position: int) -> str | None: ...

    def session_user(self) -> str | None: ...

    def chained_rows(self, lo: int = 0, hi: int | None = None) -> Iterator[HashedRow]: ...

    def hashed_events(self, lo: int = 0, hi: int | None = None) -> Iterator[HashedRow]: ...

    def parts(self, count: int, smallest: int = ...) -> list[Part] | None: ...

    def file_and_table(self) -> tuple[str, str] | None:
        """Where the log's file is, for a process of its own reading a part of it (None: no file)."""
        ...

    def import_events(self, batches: Iterable[Sequence[Imported]], tail: Tail, fmt: int) -> int: ...

    # Reads for commands, the controller and projections

    def events_of(self, streams: Sequence[UUID], until: int) -> list[EventRow]: ...

    def events_after(
        self, wanted: Sequence[tuple[UUID, int | None]], snapshots: SnapshotTable | None
    ) -> tuple[list[StoredEvent], list[StoredEvent]]: ...

    def snapshot_rows(self) -> list[tuple[Any, ...]]: ...

    def claim_of(self, stream: UUID) -> tuple[int, str | None] | None: ...

    def claims_of(self, streams: Sequence[UUID]) -> dict[UUID, tuple[int, str | None]]: ...

    def read_rows(self, after: int, limit: int, ids: dict[str, str]) -> Sequence[Row]:
        """Up to `limit` events after position `after`, as Rows (`ids` memoises the dashed ids)."""
        ...

    def rebuild_log(self) -> DirectLog:
        """Where a rebuild may read the log with connections of its own (None: through the recorder)."""
        ...

    # Watching the log

    def watched_files(self) -> list[Path]:
        """The files whose writes are changes to the log (none for a server's log)."""
        ...

    def listener(self) -> Listener | None:
        """A listener told of every append to the log; None where there is none to be had."""
        ...

    def relax_durability(self) -> None:
        """Make this recorder's own commits cheaper where a lost last commit only repeats a notification."""
        ...


class HasRecorder(Protocol):
    """An application on the log (what Backend.open_app makes)."""

    @property
    def recorder(self) -> LogRecorder: ...


def first(row: Any) -> Any:  # why: a row of any driver, a column of any type
    """The first column of a row, whether the driver gives tuples or dicts."""
    if row is None:
        return None
    return next(iter(row.values())) if isinstance(row, dict) else row[0]
