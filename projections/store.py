"""Keeping read models at the head of the log: catch-up, rebuild, shadow rebuild, status."""

from __future__ import annotations

import contextlib
import gc
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import sqlite_utils

from domain.errors import UsageError
from projections import files, health
from projections.audit_view import AuditView
from projections.desired import Desired
from projections.files import Catalog, Tracked, immediate
from projections.health import BrokenView
from projections.history import History
from projections.projection import Projection
from projections.records import Record, decode
from projections.source import EventSource

ALL: tuple[Projection, ...] = (Desired(), History(), AuditView())
BY_NAME = {p.name: p for p in ALL}
BATCH = 1000
REBUILD_BATCH = 2_000  # few enough that a batch's records stay in the CPU's caches
Progress = Callable[[int, int], None]
Warn = Callable[[str], None]


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cycle collection during a rebuild: it makes no cycles, and it keeps many objects alive
    (a batch of records, the folds' rows), which each collection would walk again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class UnknownProjection(UsageError):
    pass


def projections_named(names: Iterable[str]) -> list[Projection]:
    chosen = []
    for name in names:
        if name not in BY_NAME:
            raise UnknownProjection(f"no projection named {name!r} (known: {', '.join(BY_NAME)})")
        chosen.append(BY_NAME[name])
    return chosen or list(ALL)


class ProjectionStore:
    """The projections folder of one home, fed by one event source."""

    def __init__(
        self,
        folder: Path,
        source: EventSource,
        *,
        frozen: bool = False,
        warn: Warn | None = None,
        cache_kib: int | None = None,
    ) -> None:
        """With `cache_kib`, each projection file's connection caches at most that many KiB of pages
        (SQLite's default is 2,000 KiB): a long-lived process keeps its memory flat as files grow."""
        self.folder = folder
        self.cache_kib = cache_kib
        self.source = source
        self.frozen = frozen
        self.warn = warn or (lambda _: None)
        self.catalog = Catalog(folder, self.warn)
        self._open: dict[str, tuple[Path, sqlite_utils.Database]] = {}
        self._inodes: dict[str, tuple[int, int] | None] = {}  # of each open file, when opened
        self._log_id: str | None = None

    # -- files ---------------------------------------------------------------

    def _reopen(self, why: str) -> None:
        """The catalog this long-lived store holds is gone or broken: start again from the folder's."""
        self.warn(why)
        self.close()
        self.catalog = Catalog(self.folder, self.warn)

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
        self._open[name] = (self.catalog.current(name), db)  # type: ignore[assignment]
        self._inodes[name] = files.identity(self._open[name][0])
        return db

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
            db = sqlite_utils.Database(conn, execute_plugins=False)
            problem = health.file_problem(path) or health.schema_problem(db, projection)
            if problem is None:
                conn.execute("PRAGMA synchronous=NORMAL")
                return db
            db.close()
            if self.frozen:  # served exactly as on disk, never rebuilt (a fault-injection switch)
                raise BrokenView(projection.name, path, problem)
            self._heal(BrokenView(projection.name, path, problem))
        raise RuntimeError(f"cannot open projection {projection.name}")

    def _create_current(self, projection: Projection) -> sqlite_utils.Database | None:
        with self.catalog.setup_lock(), immediate(self.catalog.db):
            path = self.catalog.current(projection.name)
            if path is None or not path.exists():
                path = self.catalog.next_file(projection.name)
                self.catalog.point(projection.name, path)
                return self._new_file(projection, path)
            return None

    def _heal(self, broken: BrokenView) -> None:
        """Replace a file that is not a readable view by one rebuilt from the log: a cache miss.

        Under the catalog's write lock, as every build (a twin may have healed or swapped it
        meanwhile: then nothing is done). Nested in a rebuild that already holds that lock,
        the replacement commits with the rebuild."""
        self.warn(f"{broken}: rebuilding it")
        p = BY_NAME[broken.name]
        self._forget(p.name)
        catalog = self.catalog.db
        nested = catalog.conn.in_transaction
        if not nested:
            catalog.execute("BEGIN IMMEDIATE")
        try:
            if self.catalog.current(p.name) == broken.path:
                path = self.catalog.next_file(p.name)
                from projections.build import build

                build(self.source, [p], {p.name: path}, self.source.head(), self.log_id(), REBUILD_BATCH)
                self.catalog.point(p.name, path)
            if not nested:
                catalog.execute("COMMIT")
        except BaseException:
            if not nested and catalog.conn.in_transaction:
                catalog.execute("ROLLBACK")
            raise
        if not nested:
            with immediate(catalog):
                self.catalog.remove_strays(p.name, keep={self.catalog.current(p.name)})  # type: ignore[arg-type]

    def _new_file(self, projection: Projection, path: Path) -> sqlite_utils.Database:
        db = files.connect(path)
        with immediate(db):
            projection.create(db)
            files.track(db, projection.name, Tracked(projection.version, 0, ""))
        return db

    # -- catching up ---------------------------------------------------------

    def log_id(self) -> str:
        if not self._log_id:
            self._log_id = self.source.identity()
        return self._log_id

    def catch_up(self, projections: Sequence[Projection] = ALL) -> None:
        """Bring each projection to the head of the log (read-your-writes for every read).

        A file found broken on the way (overwritten or truncated while it was open here) is a
        cache miss: it is replaced by one rebuilt from the log, and the catch-up starts again."""
        if self.frozen:
            return
        if not self.catalog.path.exists():
            self._reopen(f"projections folder {self.folder} was removed: rebuilding it")
        elif not self.catalog.is_open_file():
            self._reopen(f"projections catalog {self.catalog.path} was replaced: rebuilding the views")
        for tries in range(len(projections), -1, -1):
            try:
                return self._catch_up(projections)
            except BrokenView as broken:
                if not tries:
                    raise
                self._heal(broken)

    def _catch_up(self, projections: Sequence[Projection]) -> None:
        # Positions before the head: a twin process may append and catch up in between,
        # and a position read after the head could then look ahead of the log.
        tracked = {p.name: self._tracked(p) or Tracked(p.version, 0, "") for p in projections}
        head = self.source.head()
        behind: dict[str, int] = {}
        for p in projections:
            at = tracked[p.name]
            if self._is_invalid(p, at, head):
                self.rebuild([p])
                at = files.tracked(self.db(p.name), p.name)  # type: ignore[assignment]
            if at.position < head:
                behind[p.name] = at.position
        if behind:
            self._feed({n: self.db(n) for n in behind}, min(behind.values()), head)

    def _tracked(self, p: Projection) -> Tracked | None:
        """Where `p` stands. A long-lived process keeps its file open, and its cached pages would
        hide that another emptied or replaced it: `stat` tells (the file is never opened here)."""
        db = self.db(p.name)
        path = self._open[p.name][0]
        if files.identity(path) != self._inodes.get(p.name):
            self._forget(p.name)  # replaced under us: open (and check) what is there now
            db = self.db(p.name)
        problem = health.file_problem(path)
        if problem:
            raise BrokenView(p.name, path, problem)
        with self._guard(p.name):
            return files.tracked(db, p.name)

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

    def _is_invalid(self, p: Projection, at: Tracked, head: int) -> bool:
        """Say why a projection must be replayed: other code version, other log, or ahead of the log."""
        if at.version != p.version:
            self.warn(f"projection {p.name} is version {at.version}, the code's is {p.version}: rebuilding it")
        elif at.position > head or (at.log_id and head and at.log_id != self.log_id()):
            self.warn(
                f"projection {p.name} does not match the event log (position {at.position}, head {head}): rebuilding it"
            )
        else:
            return False
        return True

    def _feed(self, dbs: dict[str, sqlite_utils.Database], start: int, until: int) -> None:
        """Apply batches from `start` to every projection in `dbs`, each batch in one transaction."""
        for batch, last in self._batches(start, until):
            for name, db in dbs.items():
                self._apply(BY_NAME[name], db, batch, last)

    def _apply(self, p: Projection, db: sqlite_utils.Database, batch: list[Record], last: int) -> None:
        with self._guard(p.name), immediate(db):
            at = files.tracked(db, p.name)
            position = at.position if at else 0
            if position >= last:
                return  # another process got here first
            p.apply(db, [r for r in batch if r.position > position])
            files.track(db, p.name, Tracked(p.version, last, self.log_id()))

    def _batches(self, start: int, until: int, size: int | None = None) -> Iterator[tuple[list[Record], int]]:
        after = start
        while after < until:
            notifications = self.source.read(after, size or BATCH)
            if not notifications:
                return
            after = notifications[-1].id
            yield [decode(n) for n in notifications], after

    # -- rebuilding ----------------------------------------------------------

    def rebuild(
        self, projections: Sequence[Projection] = ALL, *, shadow: bool = False, progress: Progress | None = None
    ) -> None:
        with paused_gc():
            if not shadow:
                self._rebuild_in_place(projections, progress)
                return
            for p in projections:
                self._rebuild_shadow(p, progress)

    def _rebuild_in_place(self, projections: Sequence[Projection], progress: Progress | None) -> None:
        """Replay from zero into new files while the live ones serve but cannot move, then swap.

        One read and decode of the log for every projection (see build). The catalog's write
        lock is held throughout, as for shadow builds, and so is each live file's: no catch-up
        moves them meanwhile, so the new files never serve a position lower than they did.
        """
        for p in projections:
            self.db(p.name)  # a file to hold, created when missing (that takes the catalog lock)
        catalog = self.catalog.db
        catalog.execute("BEGIN IMMEDIATE")
        try:
            with contextlib.ExitStack() as stack:
                for p in projections:  # the current files, as seen under the catalog lock
                    stack.enter_context(immediate(self.db(p.name)))
                    self.catalog.remove_strays(p.name, keep={self.catalog.current(p.name)})  # type: ignore[arg-type]
                paths = {p.name: self.catalog.next_file(p.name) for p in projections}
                head = self.source.head()
                self._log_id = None
                from projections.build import build  # rebuilds only: not on every read's import path

                build(self.source, projections, paths, head, self.log_id(), REBUILD_BATCH, progress)
                for p in projections:
                    self.catalog.point(p.name, paths[p.name])
                catalog.execute("COMMIT")  # the swap, while the live files still cannot move
        except BaseException:
            if catalog.conn.in_transaction:
                catalog.execute("ROLLBACK")
            raise
        for p in projections:
            self._open.pop(p.name)[1].close()
        with immediate(catalog):  # not a stray of a build in progress: builds hold this lock
            for p in projections:  # what is current now: a twin's rebuild may have swapped since ours
                self.catalog.remove_strays(p.name, keep={self.catalog.current(p.name)})  # type: ignore[arg-type]

    def _rebuild_shadow(self, p: Projection, progress: Progress | None) -> None:
        """Build a new file while the live one serves, then swap once it is not behind.

        The catalog's write lock is held throughout: shadow builds of one folder run one at
        a time, so none picks another's file name or deletes another's file in progress.
        """
        live = self.db(p.name)
        with immediate(self.catalog.db):
            path = self.catalog.next_file(p.name)
            shadow = self._new_file(p, path)
            self._log_id = None
            head = self.source.head()
            for batch, last in self._batches(0, head):
                self._apply(p, shadow, batch, last)
                if progress:
                    progress(last, head)
            with immediate(live):  # hold live catch-ups while the shadow passes the live position
                live_at = files.tracked(live, p.name)
                # A live view ahead of the log (or of another log) is wrong: pass the head, not it.
                target = min(live_at.position, self.source.head()) if live_at else 0
                shadow_at = files.tracked(shadow, p.name)
                for batch, last in self._batches(shadow_at.position if shadow_at else 0, target):
                    self._apply(p, shadow, batch, last)
                self.catalog.point(p.name, path)
            # Still under the lock: a stray now is old, never the next build's file.
            self.catalog.remove_strays(p.name, keep={path})
        shadow.close()
        self._open.pop(p.name, None)

    def close(self) -> None:
        for _, db in self._open.values():
            db.close()
        self._open.clear()
        self.catalog.db.close()

    # -- reporting -----------------------------------------------------------

    def status(self) -> list[dict[str, object]]:
        head = self.source.head()
        rows = []
        for p in ALL:
            db = self.db(p.name)
            at = files.tracked(db, p.name) or Tracked(0, 0, "")
            rows.append(
                {
                    "name": p.name,
                    "code_version": p.version,
                    "stored_version": at.version,
                    "position": at.position,
                    "head": head,
                    "lag": max(0, head - at.position),
                    "rows": sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in p.tables),
                    "stale": at.version != p.version
                    or at.position > head
                    or bool(at.log_id and head and at.log_id != self.log_id()),
                }
            )
        return rows
