"""Keeping read models at the head of the log: catch-up, rebuild (in place or in a shadow file), status.

Which file serves each view, and healing the broken ones, is `rollouts.projections.live`; the order in
which all of these take their locks is written in `rollouts.projections.locks`."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from . import files, health, locks
from . import rebuild as rebuilding
from .files import Tracked
from .health import BrokenView
from .live import LiveFiles, Warn
from .projection import Progress, Projection
from .records import Record, decode
from .registry import ALL, BY_NAME, UnknownProjection, projections_named

if TYPE_CHECKING:
    import sqlite_utils

__all__ = ["ALL", "BATCH", "BY_NAME", "ProjectionStore", "Progress", "UnknownProjection", "Warn", "projections_named"]

BATCH = 1000  # events read at a time by a catch-up (and a shadow build)
SWAPS_FOLLOWED = 10  # catch-ups again in a row when a rebuild swapped a view's file under the last one


class ProjectionStore(LiveFiles):
    """The projections folder of one home, fed by one event source."""

    # -- catching up ---------------------------------------------------------

    def catch_up_named(self, names: Iterable[str]) -> None:
        """catch_up of the projections `names` names (none: all; UnknownProjection for a name not known)."""
        self.catch_up(projections_named(names))

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
                for _ in range(SWAPS_FOLLOWED):
                    if self._catch_up(projections):
                        return
                return
            except BrokenView as broken:
                if not tries:
                    raise
                self._heal(broken)

    def _catch_up(self, projections: Sequence[Projection]) -> bool:
        """One catch-up to the head; False when a rebuild swapped a view's file meanwhile.

        A catch-up that waited for a rebuild's lock may have fed the file the rebuild then swapped
        out; the file served now may stand before the head read here (read-your-writes): go again."""
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
        return all(self.catalog.current(p.name) == self._open[p.name][0] for p in projections)

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
        with self._guard(p.name), locks.view_write(db):
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
        with rebuilding.paused_gc():
            if not shadow:
                self._again_if_broken(lambda: self._in_place(projections, progress))
                return
            for p in projections:
                self._again_if_broken(lambda p=p: self._shadow(p, progress))  # type: ignore[misc]

    def _in_place(self, projections: Sequence[Projection], progress: Progress | None) -> None:
        """Replay from zero into new files while the live ones serve but cannot move, then swap.

        One read and decode of the log for every projection (see build). The catalog's write
        lock is held throughout, as for shadow builds, and so is each live file's: no catch-up
        moves them meanwhile, so the new files never serve a position lower than they did.
        """
        for p in projections:
            self.db(p.name)  # a file to hold, created when missing (that takes the catalog lock)
        with locks.build(self.catalog):  # lock 2's flock; its transaction is committed below while lock 3 is held
            catalog = self.catalog.db
            catalog.execute("BEGIN IMMEDIATE")
            try:
                with contextlib.ExitStack() as stack:
                    for p in projections:  # the current files, as seen under the catalog lock
                        stack.enter_context(locks.view_write(self.db(p.name)))
                        self.catalog.remove_strays(p.name, keep={self.catalog.current(p.name)})  # type: ignore[arg-type]
                    paths = {p.name: self.catalog.next_file(p.name) for p in projections}
                    head = self.source.head()
                    self._log_id = None
                    rebuilding.build_into(self.source, projections, paths, head, self.log_id(), progress)
                    for p in projections:
                        self.catalog.point(p.name, paths[p.name])
                    catalog.execute("COMMIT")  # the swap, while the live files still cannot move
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # (a catalog corrupted meanwhile may refuse even this)
                    if catalog.conn.in_transaction:
                        catalog.execute("ROLLBACK")
                raise
        for p in projections:
            self._open.pop(p.name)[1].close()
        with locks.catalog_write(self.catalog):  # lock 2 again; not a stray of a build in progress: builds hold it
            for p in projections:  # what is current now: a twin's rebuild may have swapped since ours
                self.catalog.remove_strays(p.name, keep={self.catalog.current(p.name)})  # type: ignore[arg-type]

    def _shadow(self, p: Projection, progress: Progress | None) -> None:
        """Build a new file while the live one serves, then swap once it is not behind.

        The catalog's write lock is held throughout: shadow builds of one folder run one at
        a time, so none picks another's file name or deletes another's file in progress.
        """
        live = self.db(p.name)
        with locks.catalog_write(self.catalog):
            path = self.catalog.next_file(p.name)
            new = self._new_file(p, path)
            self._log_id = None
            head = self.source.head()
            for batch, last in self._batches(0, head):
                self._apply(p, new, batch, last)
                if progress:
                    progress(last, head)
            with locks.view_write(live):  # hold live catch-ups while the shadow passes the live position
                live_at = files.tracked(live, p.name)
                # A live view ahead of the log (or of another log) is wrong: pass the head, not it.
                target = min(live_at.position, self.source.head()) if live_at else 0
                shadow_at = files.tracked(new, p.name)
                for batch, last in self._batches(shadow_at.position if shadow_at else 0, target):
                    self._apply(p, new, batch, last)
                self.catalog.point(p.name, path)
            # Still under the lock: a stray now is old, never the next build's file.
            self.catalog.remove_strays(p.name, keep={path})
        new.close()
        self._open.pop(p.name, None)

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
