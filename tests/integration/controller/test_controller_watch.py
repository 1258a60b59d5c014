"""The controller's early wake-up: a commit to the log or to the runtime's table ends its wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rollouts.adapters.controller import watch as watch_module
from rollouts.adapters.controller.watch import Watch
from rollouts.adapters.home import Home
from rollouts.adapters.runtime.local import LocalRuntime
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import open_app
from rollouts.domain.spec import Spec

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


@pytest.fixture(params=["inotify", "polling"])
def parts(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Any, LocalRuntime, Watch]]:

    if request.param == "polling":  # where inotify cannot be had: data_version is polled
        monkeypatch.setattr(watch_module._Inotify, "of", classmethod(lambda cls, databases: None))
    home = Home(tmp_path / "home").ensure()
    app = open_app(home, None)
    runtime = LocalRuntime(home.path)
    watch = Watch(app, runtime, interval=10.0)
    assert (watch._files is not None) == (request.param == "inotify")
    watch.mark()
    yield app, runtime, watch
    watch.close()
    runtime.close()
    app.close()


def waited(
    watch: Watch, seconds: float, meanwhile: Callable[[], None] | None = None, settle: float = 0.0
) -> tuple[float, bool]:
    """How long watch.wait(seconds) took and what it said, with `meanwhile` run 0.1 s into it."""
    stopping = threading.Event()
    timer = threading.Timer(0.1, meanwhile) if meanwhile else None
    began = time.monotonic()
    if timer:
        timer.start()
    early = watch.wait(stopping, seconds, settle)
    took = time.monotonic() - began
    if timer:
        timer.join()
    return took, early


def create(runtime: LocalRuntime, name: str = "web-1-deploy-1") -> None:
    runtime.create(name, config="web", revision=1, attempt=1, argv=["true"], env={}, cwd="/")


def test_a_commit_to_the_log_ends_the_wait(parts: tuple[Any, LocalRuntime, Watch], tmp_path: Path) -> None:
    _, _, watch = parts
    other = open_app(Home(tmp_path / "home"), None)  # another process's commit, as the CLI makes it
    try:
        took, early = waited(watch, 10.0, lambda: other.create_config("web", Spec(command=["true"]), new_meta("t@t")))
    finally:
        other.close()
    assert 0.1 <= took < 5.0 and early


def test_a_shims_commit_to_the_runtime_ends_the_wait(parts: tuple[Any, LocalRuntime, Watch]) -> None:
    _, runtime, watch = parts
    took, early = waited(watch, 10.0, lambda: create(runtime))
    assert 0.1 <= took < 5.0 and early


def test_a_change_ends_the_wait_no_sooner_than_asked(parts: tuple[Any, LocalRuntime, Watch]) -> None:
    _, runtime, watch = parts
    took, early = waited(watch, 10.0, lambda: create(runtime), settle=1.0)
    assert 1.0 <= took < 5.0 and early


def test_with_nothing_new_the_wait_lasts_its_time(parts: tuple[Any, LocalRuntime, Watch]) -> None:
    took, early = waited(parts[2], 0.3)
    assert took >= 0.3 and not early


def test_stopping_ends_the_wait_at_once(parts: tuple[Any, LocalRuntime, Watch]) -> None:
    stopping = threading.Event()
    stopping.set()
    began = time.monotonic()
    assert parts[2].wait(stopping, 10.0) is False
    assert time.monotonic() - began < 1.0


def test_what_changed_before_the_mark_is_forgotten(parts: tuple[Any, LocalRuntime, Watch]) -> None:
    _, runtime, watch = parts
    create(runtime)
    deadline = time.monotonic() + 10
    while (row := runtime.get("web-1-deploy-1")) is None or row.state != "exited":  # its shim's last write
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.1)
    watch.mark()
    took, early = waited(watch, 0.3)
    assert took >= 0.3 and not early


def test_a_controller_on_postgres_wakes_on_a_new_event_before_its_interval(rollouts, postgres_url, tmp_path) -> None:
    """LISTEN/NOTIFY: with a 40 s interval, a rollout triggered while the controller waits still starts at once
    (bounded at 15 s, not 10: on a loaded machine the CLI and the deployer's own start took 11.7 s once)."""
    import time

    rollouts.env["ROLLOUTS_STORE"] = rollouts.store = postgres_url
    refused = rollouts.sh("controller", "run", "--interval", "20", "-q")  # shims would stop deployers between passes
    assert refused.exit_code == 2 and "not below a quarter of the lease (30 s" in refused.stderr, refused
    rollouts.env["ROLLOUTS_LEASE_SECONDS"] = "200"
    marker = tmp_path / "ran"
    assert rollouts.sh("config", "create", "web", "--", "sh", "-c", f"date +%s.%N > {marker}").exit_code == 0
    controller = rollouts.popen("controller", "run", "--interval", "40", "-q")
    try:
        time.sleep(3)  # the controller's first passes are done: it waits on its interval now
        asked = time.time()
        assert rollouts.sh("rollout", "latest", "web").exit_code == 0
        for _ in range(150):
            if marker.exists() and marker.read_text().strip():
                break
            time.sleep(0.1)
        assert marker.exists(), "the controller slept through the new rollout"
        assert float(marker.read_text()) - asked < 15  # far less than the 40 s interval
    finally:
        controller.terminate()
        controller.wait(timeout=30)


def test_on_postgres_a_notification_before_the_mark_is_forgotten(postgres_url: str, tmp_path: Path) -> None:
    """The controller's own appends notify its listener too: once a pass has begun (mark), they must not
    end the next wait, or each rollout leaves a pass with nothing to do, and the loop then heeds changes
    later and later (the next trigger's included)."""
    home = Home(tmp_path / "home").ensure()
    app = open_app(home, postgres_url)
    runtime = LocalRuntime(home.path)
    watch = Watch(app, runtime, interval=10.0)
    try:
        assert watch._listener is not None
        app.create_config("web", Spec(command=["true"]), new_meta("test"))  # NOTIFY, before the mark
        time.sleep(0.2)
        watch.mark()
        took, early = waited(watch, 0.3)
        assert took >= 0.3 and not early
        took, early = waited(watch, 5.0, lambda: app.latest("web", None, False, new_meta("test")))
        assert early and took < 2.0  # a notification after the mark still ends the wait
    finally:
        watch.close()
        runtime.close()
        app.close()


def test_on_postgres_a_store_in_another_schema_does_not_wake_the_controller(postgres_url: str, tmp_path: Path) -> None:
    """A channel is the database's: named after the table alone (the library's), every store in the
    database woke every controller (and this module's tests, run side by side, each other's waits)."""
    import psycopg

    other_schema = f"{postgres_url.rsplit('=', 1)[1]}_other"
    home, elsewhere = Home(tmp_path / "home").ensure(), Home(tmp_path / "elsewhere").ensure()
    app = open_app(home, postgres_url)
    other = open_app(elsewhere, f"{postgres_url}_other")
    runtime = LocalRuntime(home.path)
    watch = Watch(app, runtime, interval=10.0)
    try:
        watch.mark()
        took, early = waited(watch, 0.6, lambda: other.create_config("web", Spec(command=["true"]), new_meta("t")))
        assert not early and took >= 0.6
        took, early = waited(watch, 5.0, lambda: app.create_config("web", Spec(command=["true"]), new_meta("t")))
        assert early and took < 2.0
    finally:
        watch.close()
        runtime.close()
        app.close()
        other.close()
        with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{other_schema}" CASCADE')
