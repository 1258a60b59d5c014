"""A controller whose pass meets a view broken under it (SQLite: 'file is not a database') has it rebuilt
and passes again, as read commands do (cli.state.healing); it used to exit 5 (seen in chaos --steps, where
bytes landed over a view while a controller ran: a path the views' own guards did not cover)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollouts.adapters.controller import loop
from rollouts.adapters.controller.loop import Controller, claimant_id
from rollouts.adapters.home import Home
from rollouts.adapters.runtime.local import LocalRuntime
from rollouts.adapters.service.bootstrap import open_app
from rollouts.adapters.store.reader import RecorderSource
from rollouts.projections.store import ProjectionStore
from tests.broken_files import not_a_database_error
from tests.conftest import Rollouts

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


def run_with_broken_passes(rollouts: Rollouts, tmp_path: Path, breaks: int, heals: bool) -> list[str]:
    """Run a controller until idle whose first `breaks` passes meet a broken view; what it healed."""
    home = Home(rollouts.home)
    app = open_app(home, None)
    runtime = LocalRuntime(home.path)
    store = ProjectionStore(home.projections, RecorderSource(app.recorder))
    healed: list[str] = []
    try:
        controller = Controller(app, store, runtime, claimant_id(home), "tester@test", str(rollouts.cwd))
        reconcile, left = controller.reconcile, [breaks]

        def pass_meeting_a_broken_view() -> tuple[int, int]:
            if left[0]:
                left[0] -= 1
                raise not_a_database_error(tmp_path)
            return reconcile()

        def heal_broken() -> bool:  # what the store does when it finds the file broken: rebuild it
            healed.append("desired")
            return heals

        controller.reconcile = pass_meeting_a_broken_view  # type: ignore[method-assign]
        store.heal_broken = heal_broken  # type: ignore[method-assign]
        controller.run(once=False, until_idle=True, interval=0.05, timeout=60)
    finally:
        store.close()
        runtime.close()
        app.close()
    return healed


def test_a_pass_that_meets_a_broken_view_heals_it_and_goes_on(rollouts: Rollouts, tmp_path: Path) -> None:
    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0
    assert rollouts.sh("rollout", "latest", "web").exit_code == 0
    assert run_with_broken_passes(rollouts, tmp_path, breaks=2, heals=True) == ["desired", "desired"]
    assert "Complete" in rollouts.sh("rollout", "status", "web").stdout


def test_a_view_that_keeps_breaking_or_no_heal_mends_stops_the_controller(rollouts: Rollouts, tmp_path: Path) -> None:
    import sqlite3

    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0
    with pytest.raises(sqlite3.DatabaseError):
        run_with_broken_passes(rollouts, tmp_path, breaks=loop.HEALS + 1, heals=True)
    with pytest.raises(sqlite3.DatabaseError):
        run_with_broken_passes(rollouts, tmp_path, breaks=1, heals=False)
