"""The same storage behaviour on SQLite and on PostgreSQL: one code path, two stores."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from rollouts.adapters.home import Home
from rollouts.adapters.service.application import RolloutsApp, new_meta
from rollouts.adapters.service.bootstrap import bootstrap, open_app
from rollouts.domain.spec import Spec

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


def app_on(home: Path, store: str | None) -> RolloutsApp:
    return open_app(Home(home), store)


def test_a_write_is_visible_to_the_next_read_on_every_backend(rollouts_on) -> None:
    assert rollouts_on.sh("config", "create", "web", "--", "true").exit_code == 0
    assert rollouts_on.sh("rollout", "latest", "web", "--reason", "r1").stdout.strip() == "1"
    history = json.loads(rollouts_on.sh("rollout", "history", "web", "-o", "json").stdout)
    assert [(h["version"], h["phase"], h["message"]) for h in history] == [(1, "New", "r1")]


def test_two_application_instances_racing_on_one_store_lose_no_write(tmp_path: Path, backend_store) -> None:
    first, second = app_on(tmp_path / "a", backend_store), app_on(tmp_path / "a", backend_store)
    first.create_config("web", Spec(command=["true"]), new_meta("t"))
    printed: list[int] = []

    def hammer(app: RolloutsApp) -> None:
        for _ in range(15):
            printed.append(app.latest("web", None, True, new_meta("t")))

    threads = [threading.Thread(target=hammer, args=(a,)) for a in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    config = first.config("web")
    assert sorted(printed) == list(range(1, 31))
    assert config.latest_revision == 30
    assert config.open_revisions == [30]


def test_a_controller_runs_a_rollout_to_complete_and_the_audit_holds(rollouts_on, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    rollouts_on.sh("config", "create", "web", "--", "sh", "-c", f'echo "$ROLLOUT_DEPLOYER" >> {marker}')
    rollouts_on.sh("rollout", "latest", "web")
    assert rollouts_on.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    assert rollouts_on.sh("rollout", "status", "web").stdout.strip() == "web version 1 (attempt 1): Complete"
    assert marker.read_text().split() == ["web-1-deploy-1"]
    audit = json.loads(rollouts_on.sh("audit", "-o", "json").stdout)
    assert audit["ok"] and audit["events"] > 5


def test_a_deleted_running_deployer_is_lost_and_not_recreated_on_every_backend(rollouts_on, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    rollouts_on.sh("config", "create", "web", "--", "sh", "-c", f'echo "$ROLLOUT_DEPLOYER" >> {marker}; sleep 30')
    rollouts_on.sh("rollout", "latest", "web")
    rollouts_on.sh("controller", "run", "--once", "-q")
    for _ in range(50):
        if marker.exists():
            break
        threading.Event().wait(0.1)
    assert rollouts_on.sh("deployers", "delete", "web-1-deploy-1").exit_code == 0
    assert rollouts_on.sh("controller", "run", "--until-idle", "--timeout", "20", "-q").exit_code == 0
    status = rollouts_on.sh("rollout", "status", "web")
    assert status.exit_code == 1 and "lost" in status.stdout
    assert marker.read_text().split() == ["web-1-deploy-1"]


def test_projections_rebuilt_from_zero_equal_the_live_ones_on_every_backend(rollouts_on) -> None:
    rollouts_on.sh("config", "create", "web", "--", "true")
    for _ in range(3):
        rollouts_on.sh("rollout", "latest", "web", "--supersede")
    rollouts_on.sh("rollout", "cancel", "web")
    before = rollouts_on.sh("rollout", "history", "web", "-o", "json").stdout
    events_before = rollouts_on.sh("events", "-o", "json").stdout
    assert rollouts_on.sh("projections", "rebuild").exit_code == 0
    assert rollouts_on.sh("rollout", "history", "web", "-o", "json").stdout == before
    assert rollouts_on.sh("events", "-o", "json").stdout == events_before


# The library's settings name our factory and recorder classes by module path; the paths they had before the
# store wing was split (and, for PostgreSQL, before the move into adapters/store/) keep opening the log.
FORMER_SETTINGS = {
    "sqlite": [
        {
            "PERSISTENCE_MODULE": f"rollouts.adapters.{where}recorders:SQLiteStoreFactory",
            "APPLICATION_RECORDER_TOPIC": f"rollouts.adapters.{where}recorders:ChainedSQLiteRecorder",
        }
        for where in ("", "store.")
    ],
    "postgresql": [
        {
            "PERSISTENCE_MODULE": "rollouts.adapters.backend_postgres_factory:LibpqFactory",
            "APPLICATION_RECORDER_TOPIC": "rollouts.adapters.recorder_postgres:ChainedPostgresRecorder",
        }
    ],
}


def test_settings_that_name_the_recorders_former_modules_still_open_the_log(tmp_path: Path, backend_store) -> None:
    services = bootstrap(tmp_path / "home", backend_store)
    made = services.open_app()
    made.create_config("web", Spec(command=["true"]), new_meta("t"))
    log_id = made.recorder.log_id()
    made.close()
    for former in FORMER_SETTINGS["postgresql" if backend_store else "sqlite"]:
        app = services.open_app(**former)
        try:
            assert app.recorder.log_id() == log_id  # our chained recorder, on the same log
            assert app.config("web").name == "web"
            app.latest("web", None, True, new_meta("t"))
            assert app.recorder.hash_at(app.recorder.max_notification_id() or 0) is not None  # chained as it wrote
        finally:
            app.close()
