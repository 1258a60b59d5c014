"""An idle controller pass reads no more rows with many configs than with few (figure 11 of bench/run.py: the
promoter's look for auto stages scanned a row per config every pass, 2-3x at 10k configs against 100)."""

from __future__ import annotations

from pathlib import Path

from rollouts.adapters.controller.loop import Controller, claimant_id
from rollouts.adapters.home import Home
from rollouts.adapters.runtime.local import LocalRuntime
from rollouts.adapters.service.bootstrap import open_app
from rollouts.adapters.store.reader import RecorderSource
from rollouts.domain.config import DeploymentConfig
from rollouts.domain.spec import Spec
from rollouts.projections.store import ProjectionStore

ACTOR = "tester@test"


def home_with_configs(path: Path, configs: int) -> Home:
    """A home whose log holds `configs` configs and nothing else (saved in one append)."""
    home = Home(path).ensure()
    app = open_app(home, None)
    try:
        spec = Spec(command=["true"]).to_data()
        app.save(*(DeploymentConfig(name=f"c{i:05d}", spec=spec, meta={"actor": ACTOR}) for i in range(configs)))
    finally:
        app.close()
    return home


def steps_of_an_idle_pass(home: Home) -> int:
    """SQLite's progress-handler calls (one per few virtual machine steps: they grow with the rows a statement
    visits) over the controller's view and runtime connections in one idle pass, after one that caught up."""
    app = open_app(home, None)
    runtime = LocalRuntime(home.path)
    store = ProjectionStore(home.projections, RecorderSource(app.recorder))
    try:
        controller = Controller(app, store, runtime, claimant_id(home), ACTOR, str(home.path))
        assert controller.reconcile() == (0, 0)  # builds the desired view: not counted
        steps = [0]

        def count() -> int:
            steps[0] += 1
            return 0  # go on

        connections = [store.db("desired").conn, runtime._db]
        for conn in connections:
            conn.set_progress_handler(count, 1)
        assert controller.reconcile() == (0, 0)
        for conn in connections:
            conn.set_progress_handler(None, 1)
        return steps[0]
    finally:
        store.close()
        runtime.close()
        app.close()


def test_an_idle_pass_reads_as_much_with_2000_configs_as_with_20(tmp_path: Path) -> None:
    few = steps_of_an_idle_pass(home_with_configs(tmp_path / "few", 20))
    many = steps_of_an_idle_pass(home_with_configs(tmp_path / "many", 2000))
    assert few > 0
    assert many <= few * 1.1, f"an idle pass took {many} SQLite steps with 2000 configs, {few} with 20"
