"""Glances at the views for shell completion: read-only, as the files are (a view may lag the log a
little), never creating a file and never waiting for a writer past a short timeout."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path


def configs_in_view(folder: Path, wait: float) -> tuple[set[str], int]:
    """The config names the history view in `folder` holds, and the log position it stands at ((set(), 0)
    without a catalog or a history view). sqlite3.Error when a file cannot be read within `wait` seconds."""
    if not (folder / "catalog.db").is_file():
        return set(), 0
    with read_only(folder / "catalog.db", wait) as db:
        found = db.execute("SELECT file FROM current WHERE name = 'history'").fetchone()
    if found is None:
        return set(), 0
    with read_only(folder / found[0], wait) as db:
        names = {row[0] for row in db.execute("SELECT name FROM configs")}
        position = db.execute("SELECT position FROM tracking WHERE name = 'history'").fetchone()
    return names, int(position[0]) if position else 0


@contextlib.contextmanager
def read_only(path: Path, wait: float) -> Iterator[sqlite3.Connection]:
    """A connection to the SQLite file at `path` that can neither create nor change it."""
    db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=wait)
    try:
        yield db
    finally:
        db.close()
