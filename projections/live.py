"""The live file of each view: opened, checked, and replaced by one rebuilt from the log when it
is not a readable view (random bytes, zero length, another schema: a cache miss)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..domain.errors import StoreProblem
from . import files, health, locks, rebuild
from .files import Catalog, CatalogLost, Tracked
from .health import BrokenView
from .projection import Projection
from .registry import BY_NAME
from .source import EventSource

Warn = Callable[[str], None]


if TYPE_CHECKING:
    import sqlite_utils


class LiveFiles:
    """The projections folder of one home, fed by one event source: which file serves each view.

    Locks are taken in the order that `rollouts.projections.locks` writes down."""

    def __init__(
        self,
        folder: Path,
        source: EventSource,
        *,
        frozen: bool = False,
        warn: Warn | None = None,
        cache_kib: int | None = None,
        autocheckpoint: bool = True,
    ) -> None:
        """With `cache_kib`, each projection file's connection caches at most that many KiB of pages
        (SQLite's default is 2,000 KiB): a long-lived process keeps its memory flat as files grow.
        Without `autocheckpoint`, its commits never checkpoint the file's WAL: the caller does (`open_paths`)."""
        self.folder = folder
        self.cache_kib = cache_kib
        self.autocheckpoint = autocheckpoint
        self.source = source
        self.frozen = frozen
        self.warn = warn or (lambda _: None)
        self.catalog = Catalog(folder, self.warn)
        self._open: dict[str, tuple[Path, sqlite_utils.Database]] = {}
        self._inodes: dict[str, tuple[int, int] | None] = {}  # of each open file, when opened
        self._log_id: str | None = None

    def log_id(self) -> str:
        if not self._log_id:
            self._log_id = self.source.identity()
        return self._log_id

    # -- opening -------------------------------------------------------------

    def _reopen(self, why: str) -> None:
        """The catalog this long-lived store holds is gone or broken: start again from the folder's.

        Inside a build of this thread, the new catalog is refused (`CatalogLost`) before anything
        is closed: the build lets go of its locks and starts again (`_again_if_broken`)."""
        catalog = Catalog(self.folder, self.warn)  # CatalogLost inside a build of this thread
        self.warn(why)
        self.close()
        self.catalog = catalog

    def _again_if_broken(self, build: Callable[[], None], tries: int = 3) -> None:
        """`build()`, started again (at most `tries` times in all) when a file it read or wrote was
        found broken meanwhile (`health.broke_a_file`): bytes written over the catalog, a live view
        or the new file itself. The views are a cache of the log: a new build makes new files from it.
        A live view that fails SQLite's quick check is healed first; then every file is opened
        afresh (a lost catalog is replaced once the build has let go of the build lock). A build
        nested in another (a heal inside a rebuild) leaves all that to the outer one."""
        for left in range(tries - 1, -1, -1):
            try:
                build()
                return
            except Exception as error:
                if not left or self.catalog.holds_build_lock() or not health.broke_a_file(error):
                    raise
                why = " ".join(str(error.__cause__ or error).split())
                if not isinstance(error, CatalogLost) and health.catalog_readable(self.catalog.path):
                    with contextlib.suppress(sqlite3.Error, OSError, StoreProblem):
                        self.heal_broken()  # what cannot be checked now is checked as it opens again
                self._reopen(f"a projections file broke or went during a build ({why}): building again")

    def db(self, name: str) -> sqlite_utils.Database:
        """The current file of projection `name`: a readable view (rebuilt when it is not one)."""
        try:
            path = self.catalog.current(name)
        except sqlite3.DatabaseError as error:
            if not health.is_broken(error):
                raise
            self._reopen(f"projections catalog {self.catalog.path} is not readable: rebuilding the views")
            path = self.catalog.current(name)
        if name in self._open and self._open[name][0] == path:
            return self._open[name][1]
        self._forget(name)  # a swapped-out file: close it now, not at the next GC
        db = self._connect_current(BY_NAME[name])
        if self.cache_kib is not None:
            db.execute(f"PRAGMA cache_size = -{int(self.cache_kib)}")
        if not self.autocheckpoint:
            db.execute("PRAGMA wal_autocheckpoint = 0")
        self._open[name] = (self.catalog.current(name), db)  # type: ignore[assignment]
        self._inodes[name] = files.identity(self._open[name][0])
        return db

    def open_paths(self) -> list[Path]:
        """The files of the views open here."""
        return [path for path, _ in self._open.values()]

    def _forget(self, name: str) -> None:
        if name in self._open:
            self._open.pop(name)[1].close()

    def _connect_current(self, projection: Projection) -> sqlite_utils.Database:
        for _ in range(10):
            path = self.catalog.current(projection.name)
            if path is None or not path.exists():
                created = self._create_current(projection)
                if created is not None:
                    return created
                continue  # a twin created it meanwhile: open and check it as any other
            unusable = health.file_problem(path)  # a directory, say: SQLite would not open it at all
            if unusable is not None:
                if self.frozen:  # served exactly as on disk, never rebuilt (a fault-injection switch)
                    raise BrokenView(projection.name, path, unusable)
                self._heal(BrokenView(projection.name, path, unusable))
                continue
            try:
                conn = sqlite3.connect(
                    f"file:{path}?mode=rw",
                    uri=True,
                    timeout=files.BUSY_TIMEOUT_S,
                    isolation_level=None,
                    check_same_thread=False,
                )
            except sqlite3.OperationalError:
                continue  # swapped and removed between the lookup and the open
            import sqlite_utils  # start-up cost: only where a view is opened

            db = sqlite_utils.Database(conn, execute_plugins=False)
            try:
                problem = health.file_problem(path) or health.schema_problem(db, projection)
            except sqlite3.OperationalError:
                db.close()
                if self.catalog.current(projection.name) != path:
                    continue  # swapped and removed between the open and the first read (SQLite reads lazily)
                raise
            if problem is None:
                conn.execute("PRAGMA synchronous=NORMAL")
                return db
            db.close()
            if self.frozen:  # served exactly as on disk, never rebuilt (a fault-injection switch)
                raise BrokenView(projection.name, path, problem)
            self._heal(BrokenView(projection.name, path, problem))
        raise RuntimeError(f"cannot open projection {projection.name}")

    def _create_current(self, projection: Projection) -> sqlite_utils.Database | None:
        try:
            with locks.setup(self.catalog), locks.catalog_write(self.catalog):
                path = self.catalog.current(projection.name)
                if path is None or not path.exists():
                    path = self.catalog.next_file(projection.name)
                    self.catalog.point(projection.name, path)
                    return self._new_file(projection, path)
                return None
        except CatalogLost:
            if self.catalog.holds_build_lock():
                raise  # for the build of this thread to start again
            self._reopen(f"projections catalog {self.catalog.path} was replaced: opening the new one")
            return None

    def _new_file(self, projection: Projection, path: Path) -> sqlite_utils.Database:
        db = files.connect(path, projection.page_size)
        with locks.view_write(db):
            projection.create(db)
            files.track(db, projection.name, Tracked(projection.version, 0, ""))
        return db

    # -- healing -------------------------------------------------------------

    def _heal(self, broken: BrokenView) -> None:
        """Replace a file that is not a readable view by one rebuilt from the log: a cache miss.

        Under the catalog's write lock, as every build (a twin may have healed or swapped it
        meanwhile: then nothing is done). Nested in a rebuild that already holds that lock,
        the replacement commits with the rebuild."""
        self.warn(f"{broken}: rebuilding it")
        self._again_if_broken(lambda: self._replace(BY_NAME[broken.name], broken.path))

    def _replace(self, p: Projection, broken: Path | None) -> None:
        self._forget(p.name)
        with locks.catalog_write_unless_held(self.catalog) as taken:
            if self.catalog.current(p.name) == broken:
                path = self.catalog.next_file(p.name)
                rebuild.build_into(self.source, [p], {p.name: path}, self.source.head(), self.log_id())
                self.catalog.point(p.name, path)
        if taken:
            with locks.catalog_write(self.catalog):
                self.catalog.remove_strays(p.name, keep={self.catalog.current(p.name)})  # type: ignore[arg-type]

    def heal_broken(self) -> bool:
        """After an SQLite error that may come from a view: rebuild each open one that is broken."""
        healed = False
        for name, (path, db) in list(self._open.items()):
            problem = health.file_problem(path) or health.integrity_problem(db)
            if problem:
                self._heal(BrokenView(name, path, problem))
                healed = True
        return healed

    @contextlib.contextmanager
    def _guard(self, name: str) -> Iterator[None]:
        """An SQLite error that says the open file of `name` is broken becomes BrokenView."""
        try:
            yield
        except sqlite3.DatabaseError as error:
            if not health.is_broken(error) or name not in self._open:
                raise
            raise BrokenView(name, self._open[name][0], " ".join(str(error).split())) from None

    def query(self, name: str, sql: str, params: Sequence[object] = ()) -> list[dict[str, object]]:
        """The rows of `sql` on projection `name`; a file found broken is rebuilt and asked again."""
        for tries in (1, 0):
            try:
                with self._guard(name):
                    return list(self.db(name).query(sql, params))
            except BrokenView as broken:
                if not tries:
                    raise
                self._heal(broken)
        raise AssertionError("unreachable")

    def close(self) -> None:
        for _, db in self._open.values():
            db.close()
        self._open.clear()
        self.catalog.db.close()
