"""The documents read commands print with `-o json` and `rollouts serve` answers: one function each."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ...projections import history_queries
from ...projections.rows import ViewRow
from .stage_view import promoted_from

if TYPE_CHECKING:
    import sqlite_utils

# The deployment number is `revision` in the code and the views; DESIGN 7's documents (JSON, tables, the page)
# name it `version`: renamed here, where a view's row becomes what is printed, and nowhere else.
SHOWN_AS = {"revision": "version", "latest_revision": "latest_version"}
_INTERNAL = ("stream", "config", "step")  # history columns that only join views


def json_text(document: object) -> str:
    """The one JSON rendering: what `-o json` prints (without its newline) and the API's body."""
    return json.dumps(document, indent=2, default=str)


def shell_words(argv: Sequence[str]) -> str:
    """`argv` as a shell would need it typed, on one line: shlex quoting, and bash's $'...' for an
    argument with a newline, tab or other control character (which a table cell would flatten)."""
    return " ".join(_ansi_c(arg) if any(not c.isprintable() for c in arg) else shlex.quote(arg) for arg in argv)


def _ansi_c(arg: str) -> str:
    return "$'" + "".join(_ansi_c_char(c) for c in arg) + "'"


def _ansi_c_char(c: str) -> str:
    named = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    if c in named:
        return named[c]
    if c.isprintable():
        return c
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"


def shown(row: ViewRow) -> ViewRow:
    """`row` with its keys as the documents name them (SHOWN_AS), in the same order; its values as they are."""
    return {SHOWN_AS.get(k, k): v for k, v in row.items()}


def config_list(db: sqlite_utils.Database, now: datetime) -> list[ViewRow]:
    """`config list`: every config with its latest revision and phase, the freezes in force at `now`,
    and its command as a shell types it."""

    rows = history_queries.configs(db, None, now)
    for row in rows:
        row["command"] = shell_words(row["spec"]["command"])
    return [shown(row) for row in rows]


def history(db: sqlite_utils.Database, name: str, revision: int | None = None) -> list[ViewRow]:
    """`rollout history NAME [--revision N]`: the deployments (NotFound: no such config or revision)."""
    rows = history_queries.deployments(db, name, revision)
    return [history_document(row) for row in rows]


_STEP_COLUMNS = ("step_index", "passed", "failed", "inconclusive")


def history_document(row: ViewRow) -> ViewRow:
    """A history row as JSON shows it: 7.6's `step` (the rollout step), `verification` (counts) and the rest."""
    document = {
        SHOWN_AS.get(k, k): v
        for k, v in row.items()
        if k not in _INTERNAL and k not in _STEP_COLUMNS and k != "measurements"
    }
    if "steps" in row:  # (`--revision N`: its runs)
        document["steps"] = [shown(run) for run in row["steps"]]
    document["step"] = row.get("step_index")
    document["verification"] = {k: row.get(k) or 0 for k in ("passed", "failed", "inconclusive")}
    document["verification"]["measurements"] = row.get("measurements", [])
    document["promoted_from"] = promoted_from(row.get("cause"))  # 7.10: {config, revision} of a promotion
    return document
