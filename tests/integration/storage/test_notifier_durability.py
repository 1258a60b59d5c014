"""The notifier's own bookkeeping commits with synchronous=NORMAL; every other writer keeps SQLite's FULL."""

from __future__ import annotations

from pathlib import Path

from rollouts.adapters.service.application import RolloutsApp, new_meta
from rollouts.adapters.service.bootstrap import bootstrap
from rollouts.domain.spec import Spec

FULL, NORMAL = 2, 1


def synchronous_of_the_writer(app: RolloutsApp) -> int:
    with app.recorder.datastore.get_connection(commit=True) as conn:
        cursor = conn.cursor()
        cursor.execute("PRAGMA synchronous")
        return cursor.fetchone()[0]


def test_only_the_relaxed_application_saves_with_synchronous_normal(tmp_path: Path) -> None:
    services = bootstrap(tmp_path / "home")
    notifier, other = services.open_app(), services.open_app()
    notifier.recorder.relax_durability()

    notifier.create_config("web", Spec(command=["true"]), new_meta("tester"))
    other.create_config("api", Spec(command=["true"]), new_meta("tester"))

    assert synchronous_of_the_writer(notifier) == NORMAL
    assert synchronous_of_the_writer(other) == FULL
