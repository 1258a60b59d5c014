"""Replacing a projection file that is not a readable view by one rebuilt from the log (a cache miss)."""

from __future__ import annotations

from pathlib import Path

from projections.build import build
from projections.files import Catalog, immediate
from projections.projection import Projection
from projections.source import EventSource


def replace(catalog: Catalog, source: EventSource, p: Projection, broken: Path, log_id: str, batch: int) -> None:
    """Point the catalog at a new file of `p` built to the head, if it still points at `broken`.

    Under the catalog's write lock, as every build: a twin may have healed or swapped the file
    meanwhile, and then nothing is done. Nested in a rebuild that already holds that lock, the
    replacement commits with the rebuild (and leaves the strays to it)."""
    db = catalog.db
    nested = db.conn.in_transaction
    if not nested:
        db.execute("BEGIN IMMEDIATE")
    try:
        if catalog.current(p.name) == broken:
            path = catalog.next_file(p.name)
            build(source, [p], {p.name: path}, source.head(), log_id, batch)
            catalog.point(p.name, path)
        if not nested:
            db.execute("COMMIT")
    except BaseException:
        if not nested and db.conn.in_transaction:
            db.execute("ROLLBACK")
        raise
    if not nested:
        with immediate(db):
            catalog.remove_strays(p.name, keep={catalog.current(p.name)})  # type: ignore[arg-type]
