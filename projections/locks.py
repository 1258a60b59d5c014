"""The lock order of a projections folder, in one place, and the locks that follow it.

Processes on one home (read commands, twin controllers, rebuilds) share the folder. Each
takes these locks in this order, and never asks for an earlier one while it holds a later one:

1. SETUP: `flock` on the folder (`Catalog.setup_lock`). New SQLite files opened by several
   processes at once fail, so a new catalog, or the first file of a view that has none, is made
   under it. Taken alone, or before 2.
2. CATALOG: `flock` on `build.lock` (`Catalog.build_lock`), then the catalog's write transaction
   (BEGIN IMMEDIATE on `catalog.db`). Whoever holds it
   may pick a new file name, point a view at another file (the swap), and remove the files the
   catalog does not point to. Every build (in-place or shadow rebuild, healing a broken file)
   holds it from the file's name to its swap, so builds of one folder run one at a time: none
   picks another's name or deletes another's file in progress. Replacing an unreadable catalog
   (under 1) takes the flock too before it removes the folder's files: the lock file outlives
   the catalog, so a build on the old catalog is never left writing a removed file.
3. VIEW: each view file's write transaction (BEGIN IMMEDIATE on its file), in `registry.ALL`
   order when a process holds several. A catch-up takes only these, one batch at a time. A
   rebuild holds the live files' locks while it swaps, so they cannot move in between: the new
   file never serves a position lower than the old one did.

A rebuild commits the swap (2) while still holding the live files (3): the only release out of
order, and it waits for nothing. SQLite's busy timeout (`files.BUSY_TIMEOUT_S`) bounds every wait.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from .files import Catalog, CatalogLost, immediate

if TYPE_CHECKING:
    import sqlite_utils


def setup(catalog: Catalog) -> AbstractContextManager[None]:
    """Lock 1: making new files in the folder."""
    return catalog.setup_lock()


@contextmanager
def build(catalog: Catalog) -> Iterator[None]:
    """Lock 2's flock, on the catalog this process opened: `CatalogLost` when another replaced it
    meanwhile (its removals and swaps would go by a catalog nobody reads any more)."""
    with catalog.build_lock():
        if not catalog.is_open_file():
            raise CatalogLost(f"projections catalog {catalog.path} was replaced")
        yield


@contextmanager
def catalog_write(catalog: Catalog) -> Iterator[sqlite_utils.Database]:
    """Lock 2: choosing, swapping and removing the files of views."""
    with build(catalog), immediate(catalog.db) as db:
        yield db


def view_write(db: sqlite_utils.Database) -> AbstractContextManager[sqlite_utils.Database]:
    """Lock 3: moving one view's file (a batch of a catch-up), or holding it still during a swap."""
    return immediate(db)


@contextmanager
def catalog_write_unless_held(catalog: Catalog) -> Iterator[bool]:
    """Lock 2, or nothing when this process already holds it (healing inside a rebuild): yields
    whether it was taken here (then it commits here; else it commits with the holder's swap)."""
    db = catalog.db
    if db.conn.in_transaction:
        yield False
        return
    with catalog_write(catalog):
        yield True
