"""The analysis templates as read commands show them (`analysis list|show`): folded from the audit view's events
of their streams (the aggregate, domain.analysis_template, stays what commands decide on)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .records import document

if TYPE_CHECKING:
    import sqlite_utils

KIND = "domain.analysis_template:AnalysisTemplate"  # the audit view's kind for a template's stream
EVENTS = """SELECT e.stream, e.type, e.data, e.position, e.timestamp FROM events AS e
JOIN streams AS s ON s.stream = e.stream WHERE s.kind = ? ORDER BY e.position"""


def templates(db: sqlite_utils.Database) -> dict[str, dict[str, Any]]:
    """Every template the log holds (deleted ones too, marked), by name, as its events fold."""
    by_stream: dict[str, dict[str, Any]] = {}
    for row in db.query(EVENTS, [KIND]):
        data = document(row["data"])[1]
        found = by_stream.get(row["stream"])
        if row["type"] == "Created" or found is None:
            found = by_stream[row["stream"]] = {
                "name": data.get("template"),
                "revision": 0,
                "spec": {},
                "users": [],
                "deleted": False,
                "revisions": {},
            }
        _apply(found, row["type"], data, row["timestamp"])
    return {t["name"]: t for t in by_stream.values() if t["name"] is not None}


def _apply(template: dict[str, Any], type_: str, data: dict[str, Any], when: str) -> None:
    if type_ in ("Created", "Changed"):
        template.update(spec=data.get("spec") or {}, revision=template["revision"] + 1, deleted=False, changed=when)
        template["reason"] = data.get("reason")
        template["revisions"][template["revision"]] = template["spec"]
    elif type_ == "Deleted":
        template["deleted"] = True
    elif type_ == "NamedBy":
        template["users"] = sorted({*template["users"], data.get("config")})
    elif type_ == "UnnamedBy":
        template["users"] = [u for u in template["users"] if u != data.get("config")]


CLAIMS = """SELECT data FROM events WHERE config = ? AND revision = ? AND attempt = ? AND type = 'DeployerClaimed'
ORDER BY position"""


def claimed(db: sqlite_utils.Database, config: str, revision: int, attempt: int) -> dict[str, int]:
    """The template revisions the claim of that attempt fixed (DESIGN 7.9), by template name."""
    fixed: dict[str, int] = {}
    for row in db.query(CLAIMS, [config, revision, attempt]):
        for entry in document(row["data"])[1].get("analysis") or ():
            fixed[entry["template"]] = int(entry["version"])
    return fixed
