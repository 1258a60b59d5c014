"""Only the store wing (adapters/store/) knows which store is in use: nothing else asks a datastore, a
recorder or the command's state which backend it is (each such question is a method of the port,
adapters.store.port.Backend)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("adapters", "projections", "domain")
STORE_WING = "adapters/store/"  # the port, each backend behind it, and the one module that picks a backend


PROBES = {
    "a datastore's schema looked for": re.compile(r"getattr\([^)]*[\"']schema[\"']"),
    "a datastore or recorder's type asked": re.compile(r"isinstance\([^,)]*(datastore|recorder)"),
    "the library's backend classes named": re.compile(
        r"\b(SQLiteApplicationRecorder|PostgresApplicationRecorder|SQLiteDatastore|PostgresDatastore)\b"
    ),
    "a recorder's backend reached through it": re.compile(r"recorder\)?\.backend\b"),
    "a recorder or datastore probed for an attribute": re.compile(r"\b(hasattr|getattr)\([^,)]*(recorder|datastore)\b"),
    "the store URL's kind asked": re.compile(r"isinstance\([^)]*\b(PostgresURL|SQLiteInHome)\b"),
    "the command's --store tested": re.compile(
        r"\bstate\.store\b(?!_)|\b(if|not|and)\s+[\w.()]*params\.get\([\"']store[\"']\)"
    ),
}


def probes_in(text: str) -> list[str]:
    return [f"{what}: {line.strip()}" for line in text.splitlines() for what, rx in PROBES.items() if rx.search(line)]


def test_no_module_but_the_backends_asks_which_backend_is_in_use() -> None:
    found = {}
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if not name.startswith(STORE_WING) and (hits := probes_in(path.read_text())):
                found[name] = hits
    assert found == {}


def test_the_probes_are_recognised() -> None:
    """The patterns catch the forms this code base used before the port (else the test above proves nothing)."""
    before = [
        'schema = getattr(datastore, "schema", None)',
        "if not isinstance(app.recorder, SQLiteApplicationRecorder):",
        "if not isinstance(datastore, SQLiteDatastore) or datastore.pool.is_sqlite_memory_mode:",
        "if state.store and not once:",
        'if not ctx.find_root().params.get("store"):',
        "if isinstance(store, PostgresURL):",
        "app.recorder.backend = self.backend",
        "self.app.recorder.backend.relax_durability(self.app)",
        "backend, datastore = recorder.backend, recorder.datastore",
        'if not hasattr(recorder, "file_and_table") or count < 2:',
        'many = getattr(self.event_store.recorder, "events_after", None)',
        'pool = getattr(datastore, "pool", None)',
    ]
    assert all(probes_in(line) for line in before)
    assert not probes_in("if state.backend.shared and not once:")
    assert not probes_in("self.app.recorder.relax_durability()")
