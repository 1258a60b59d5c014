"""The store port: what the SQLite and the PostgreSQL backends each do in their own dialect.

Callers hold a Backend (bootstrap makes it from `--store`; a recorder it opened carries it as
`recorder.backend`) and never ask which one it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from ...domain.errors import StoreProblem
from ...projections.log_file import Row  # a notification as projections need it (one type for both)

if TYPE_CHECKING:
    from ...projections.source import DirectLog
    from .url import StoreURL

T = TypeVar("T")
CHAIN_TABLE = "rollouts_chain"  # beside the log: each position's hash (adapters/store/recorders)
LOG_TABLE = "rollouts_log"  # beside the log: its id
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


class Listener(Protocol):
    """Something that says when the log changed, with a descriptor to wait on."""

    fd: int

    def changed(self) -> bool: ...

    def close(self) -> None: ...


class Backend(Protocol):
    """One store: how to open it, and the statements and watches that differ between backends."""

    store: StoreURL
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

    def has_log(self) -> bool:
        """Whether the store holds a log (True when it cannot tell: opening it then says why)."""
        ...

    def table(self, name: str) -> str:
        """A table of ours beside the log, as statements name it."""
        ...

    def create_table(self, datastore: Any, ddl: str) -> None:
        """Run a CREATE TABLE IF NOT EXISTS (or ALTER TABLE ... ADD COLUMN), safe beside another doing so."""
        ...

    def table_exists(self, datastore: Any, name: str) -> bool: ...

    def columns(self, datastore: Any, name: str) -> set[str]: ...

    def add_column(self, datastore: Any, name: str, column: str, kind: str) -> None:
        """Add a column, unless a process beside us just did."""
        ...

    def watched_files(self, recorder: Any) -> list[Path]:
        """The files whose writes are changes to the log (none for a server's log)."""
        ...

    def listener(self, recorder: Any) -> Listener | None:
        """A listener told of every append to the log; None where there is none to be had."""
        ...

    def read_rows(self, recorder: Any, after: int, limit: int, ids: dict[str, str]) -> Sequence[Row]:
        """Up to `limit` events after position `after`, as Rows (`ids` memoises the dashed ids)."""
        ...

    def rebuild_log(self, recorder: Any) -> DirectLog:
        """Where a rebuild may read the log with connections of its own (None: through the recorder)."""
        ...

    def glance(self, after: int, topic: str, wait: float) -> list[bytes]:
        """The stored states of `topic`'s events after position `after`, read as cheaply as can be (for
        shell completion): nothing is created, no lock is waited for past `wait`; none from a server."""
        ...

    def snapshot(self) -> AbstractContextManager[Snapshot]:
        """A Snapshot of the log (StoreUnavailable when there is none, or it cannot be read)."""
        ...

    def relax_durability(self, app: Any) -> None:
        """Make `app`'s own commits cheaper where a lost last commit only repeats a notification."""
        ...

    def undo_of_opening(self) -> Callable[[], None]:
        """Looked at before a log is opened to be filled (log import): a function that removes what the
        opening then made (the log's file, or the schema and its objects), for an import refused halfway.
        Call it with the store closed; it never raises."""
        ...


def first(row: Any) -> Any:
    """The first column of a row, whether the driver gives tuples or dicts."""
    if row is None:
        return None
    return next(iter(row.values())) if isinstance(row, dict) else row[0]
