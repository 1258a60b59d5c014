"""Crash, disk full (DESIGN 7.1): on a real full disk (a small tmpfs) writes exit 5 with one line,
append nothing partial, and the home works again once space is back. Needs root (mount)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts

STORE = 5


@contextmanager
def small_disk(path: Path, kib: int) -> Iterator[Path]:
    """A tmpfs of `kib` KiB mounted at `path`, always unmounted afterwards; skips where mount is not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={kib}k,mode=0700", "tmpfs", str(path)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        why = " ".join(mounted.stderr.split()) or f"exit {mounted.returncode}"
        pytest.skip(f"cannot mount a tmpfs at {path} (needs root with mount permission): {why}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill(disk: Path) -> Path:
    """Write a filler file until the disk says ENOSPC, to the last block."""
    filler = disk / f"filler-{uuid.uuid4().hex[:6]}"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 16, 1 << 12, 1 << 9, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError as error:
                assert error.errno == 28, error
    finally:
        os.close(fd)
    return filler


def one_error_line(result: Result) -> None:
    assert result.exit_code == STORE, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.stderr
    return result


def events(rollouts: Rollouts) -> list[tuple[int, str, str | None]]:
    rows = json.loads(ok(rollouts.sh("events", "-o", "json")).stdout)
    return [(e["position"], e["type"], e["config"]) for e in rows]


def home_on(rollouts: Rollouts, disk: Path) -> None:
    rollouts.home = disk / "home"
    rollouts.env["ROLLOUTS_HOME"] = str(rollouts.home)


def test_writes_on_a_full_disk_exit_5_append_nothing_and_the_home_works_again(
    rollouts_on: Rollouts, tmp_path: Path
) -> None:
    with small_disk(tmp_path / "disk", 1024) as disk:
        home_on(rollouts_on, disk)
        ok(rollouts_on.sh("config", "create", "web", "--", "true"))
        ok(rollouts_on.sh("rollout", "latest", "web"))
        ok(rollouts_on.sh("controller", "run", "--until-idle", "--timeout", "30", "-q"))
        ok(rollouts_on.sh("rollout", "latest", "web"))  # version 2 waits for a controller
        before = events(rollouts_on)
        # A watcher keeps the log open, as a running controller or reader does: its WAL and shared
        # memory stay, so the writes below open the log and fail on their append.
        watcher = rollouts_on.popen("rollout", "status", "web", "--watch", "--timeout", "120")
        try:
            assert watcher.stdout is not None and "version 2" in watcher.stdout.readline()
            filler = fill(disk)
            for args in (("config", "create", "other", "--", "true"), ("rollout", "cancel", "web")):
                result = rollouts_on.sh(*args)
                if rollouts_on.store:  # the log is elsewhere: committed, and reported done
                    ok(result)
                else:
                    one_error_line(result)
            one_error_line(rollouts_on.sh("controller", "run", "--once"))  # its views and runtime are on the full disk
            filler.unlink()
        finally:
            watcher.kill()
            watcher.communicate()
        after = events(rollouts_on)
        assert not any(t == "DeployerClaimed" for _, t, _ in after[len(before) :]), "a claim got in"
        if rollouts_on.store:
            assert [(t, c) for _, t, c in after[len(before) :]].count(("Registered", "other")) == 1
        else:
            assert after == before, "the failed writes appended something"
            ok(rollouts_on.sh("config", "create", "other", "--", "true"))
        ok(rollouts_on.sh("rollout", "latest", "other"))
        ok(rollouts_on.sh("controller", "run", "--until-idle", "--timeout", "30", "-q"))
        assert "Complete" in ok(rollouts_on.sh("rollout", "status", "other")).stdout
        assert json.loads(ok(rollouts_on.sh("audit", "-o", "json")).stdout)["ok"] is True


def test_a_write_committed_while_the_views_cannot_grow_is_done_and_shows_once_space_is_back(
    rollouts: Rollouts, tmp_path: Path
) -> None:
    ok(rollouts.sh("config", "create", "web", "--", "true"))
    ok(rollouts.sh("rollout", "latest", "web"))
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q"))
    for stale in (rollouts.home / "projections").iterdir():
        stale.unlink()
    with small_disk(rollouts.home / "projections", 1024) as projections:
        ok(rollouts.sh("config", "list"))  # the views, rebuilt on the small disk
        filler = fill(projections)
        latest = ok(rollouts.sh("rollout", "latest", "web"))
        assert latest.stdout.strip() == "2"
        one_error_line(rollouts.sh("rollout", "status", "web"))  # its view cannot be brought up to date
        one_error_line(rollouts.sh("controller", "run", "--once"))
        filler.unlink()
        assert ok(rollouts.sh("rollout", "status", "web")).stdout.startswith("web version 2 ")
        ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q"))
        live = ok(rollouts.sh("rollout", "history", "web", "-o", "json")).stdout
        ok(rollouts.sh("projections", "rebuild"))
        assert ok(rollouts.sh("rollout", "history", "web", "-o", "json")).stdout == live
        assert [r["phase"] for r in json.loads(live)] == ["Complete", "Complete"]


def test_a_controller_pass_that_committed_its_claim_before_the_disk_filled_is_done_with_a_warning(
    rollouts: Rollouts, tmp_path: Path
) -> None:
    """The runtime's disk fills: the claim (in the log, elsewhere) is committed, the create fails.
    The pass is reported done (exit 0, a warning), and the next pass creates the deployer once."""
    rollouts.home.mkdir(mode=0o700)
    with small_disk(rollouts.home / "runtime", 1024) as runtime:
        # A running deployer's shim keeps runtime.db open: the controller below opens it on the full disk.
        ok(rollouts.sh("config", "create", "slow", "--", "sleep", "60"))
        ok(rollouts.sh("rollout", "latest", "slow"))
        ok(rollouts.sh("controller", "run", "--once", "-q"))
        try:
            ok(rollouts.sh("config", "create", "web", "--", "true"))
            ok(rollouts.sh("rollout", "latest", "web"))
            filler = fill(runtime)
            result = rollouts.sh("controller", "run", "--once", "-q")
            assert result.exit_code == 0, result.stderr
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("warning: the pass committed its events"), result.stderr
            filler.unlink()
            claims = ok(rollouts.sh("events", "web", "--type", "DeployerClaimed", "-o", "json")).stdout
            assert len(json.loads(claims)) == 1
        finally:
            rollouts.sh("rollout", "cancel", "slow")
            rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q")
        assert "Complete" in ok(rollouts.sh("rollout", "status", "web")).stdout
        created = ok(rollouts.sh("events", "web", "--type", "DeployerCreated", "-o", "json")).stdout
        assert len(json.loads(created)) == 1
        assert json.loads(ok(rollouts.sh("audit", "-o", "json")).stdout)["ok"] is True


def test_a_single_pass_whose_append_the_store_refuses_fails_and_is_not_reported_done(rollouts: Rollouts) -> None:
    """`controller run --once` said 'store unavailable ...; retrying' and exited 0, as if the pass had been done
    (seen with the log made immutable). The refusal is SQLite's own error, raised at the app's save; the
    command's error is StoreUnavailable (the CLI's exit 5), whatever the driver's error."""
    import sqlite3

    from rollouts.adapters.controller.loop import Controller, claimant_id
    from rollouts.adapters.home import Home
    from rollouts.adapters.runtime.local import LocalRuntime
    from rollouts.adapters.service.bootstrap import open_app
    from rollouts.adapters.store.port import StoreUnavailable
    from rollouts.adapters.store.reader import RecorderSource
    from rollouts.projections.store import ProjectionStore

    ok(rollouts.sh("config", "create", "web", "--", "true"))
    ok(rollouts.sh("rollout", "latest", "web"))
    home = Home(rollouts.home)
    app = open_app(home, None)
    runtime = LocalRuntime(home.path)
    store = ProjectionStore(home.projections, RecorderSource(app.recorder))
    try:

        def refused(*_: object, **__: object) -> None:
            raise sqlite3.OperationalError("attempt to write a readonly database")

        app.save = refused  # type: ignore[method-assign]
        controller = Controller(app, store, runtime, claimant_id(home), "tester@test", str(rollouts.cwd))
        with pytest.raises(StoreUnavailable, match="the pass failed: .*attempt to write a readonly database"):
            controller.run(once=True, until_idle=False, interval=0.05, timeout=None)
    finally:
        store.close()
        runtime.close()
        app.close()
    assert "version 1 (attempt 1): New" in rollouts.sh("rollout", "status", "web").stdout


def test_a_rebuild_whose_index_sorts_find_the_temp_disk_full_exits_5_and_the_views_stay(
    rollouts: Rollouts, tmp_path: Path
) -> None:
    """A rebuild sorts its indexes in temp files (files.for_sorting; SQLite's sorter keeps up to 250 pages
    in memory, 4 MB of the audit view's, so 100k events spill): with no room there it fails with one
    line naming that folder, exit 5, and leaves the views as they were; with room again it rebuilds."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the checkout, where `bench` is
    from bench.performance.generate import generate  # users and a controller, through the domain
    from rollouts.adapters.home import Home

    generate(Home(rollouts.home), 100_000, 20, 200, 3)
    listed = ok(rollouts.sh("rollout", "history", "svc-001", "-o", "json")).stdout
    with small_disk(tmp_path / "tmp", 64) as disk:
        fill(disk)
        failed = rollouts.sh("projections", "rebuild", env={"SQLITE_TMPDIR": str(disk)})
        one_error_line(failed)
        # the line names the folder that lacked room (the views' own had some)
        assert f"no room to sort the audit view's indexes: in SQLite's temp folder {disk} or in " in failed.stderr
    assert ok(rollouts.sh("rollout", "history", "svc-001", "-o", "json")).stdout == listed
    ok(rollouts.sh("projections", "rebuild"))
    assert ok(rollouts.sh("rollout", "history", "svc-001", "-o", "json")).stdout == listed
    assert json.loads(ok(rollouts.sh("audit", "-o", "json")).stdout)["ok"] is True
