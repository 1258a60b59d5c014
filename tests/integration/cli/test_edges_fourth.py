"""The small edges of DESIGN 7.11 (issue 46, item 9 and its extras), each as the command line shows it."""

from __future__ import annotations

import json
import time
import uuid

import psycopg
import pytest
from conftest import POSTGRES, Rollouts

pytestmark = pytest.mark.slow  # real subprocesses, a controller, PostgreSQL


def one_error(result: object, code: int) -> str:
    """The one `error:` line of a refused command that exited `code`."""
    assert result.exit_code == code, result  # type: ignore[attr-defined]
    err: str = result.stderr  # type: ignore[attr-defined]
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def test_a_store_url_naming_its_schema_twice_is_refused(rollouts: Rollouts, postgres_url: str) -> None:
    """`?schema=a&schema=b` used the first, silently; the write went into a schema nobody named alone."""
    first, second = f"t_{uuid.uuid4().hex[:12]}", f"t_{uuid.uuid4().hex[:12]}"
    store = f"{POSTGRES}?schema={first}&schema={second}"
    err = one_error(rollouts.sh("config", "create", "web", "--", "true", env={"ROLLOUTS_STORE": store}), 2)
    assert "'schema' is given twice" in err
    with psycopg.connect(POSTGRES) as conn:
        made = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname IN (%s, %s)", (first, second)).fetchone()
    assert made is not None and made[0] == 0
    assert not rollouts.home.exists()


def test_a_home_where_nothing_can_be_made_is_said_in_words(rollouts: Rollouts) -> None:
    """`--home /proc/1` printed `error: FileNotFoundError: [Errno 2] ...`."""
    for home in ("/proc/1", "/proc/1/nothing/here"):
        err = one_error(rollouts.sh("--home", home, "config", "create", "web", "--", "true"), 5)
        assert "Errno" not in err and "FileNotFoundError" not in err, err
        # (/proc/1 exists: where this account may not write it, it is a read-only home, said so; else it
        # cannot be made a home)
        assert ("cannot be made" in err and "give --home a directory" in err) or "cannot be written" in err, err


def test_status_of_one_revision(rollouts_on: Rollouts) -> None:
    r = rollouts_on
    assert r.sh("config", "create", "web", "--", "true").exit_code == 0
    assert r.sh("rollout", "latest", "web").exit_code == 0
    assert r.sh("controller", "run", "--until-idle").exit_code == 0
    assert r.sh("config", "set", "web", "--", "false").exit_code == 0
    assert r.sh("rollout", "latest", "web").exit_code == 0
    first = r.sh("rollout", "status", "web", "--revision", "1")
    assert first.exit_code == 0 and first.stdout == "web version 1 (attempt 1): Complete\n", first
    latest = r.sh("rollout", "status", "web")
    assert latest.exit_code == 0 and latest.stdout.startswith("web version 2 (attempt 1): New"), latest
    assert '"version": 1' in r.sh("rollout", "status", "web", "--revision", "1", "-o", "json").stdout
    assert "no revision 9" in one_error(r.sh("rollout", "status", "web", "--revision", "9"), 4)


def test_watch_with_timeout_0_waits_for_ever(rollouts: Rollouts) -> None:
    """`--timeout 0` timed out at once; kubectl's 0 means no timeout."""
    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0
    assert rollouts.sh("rollout", "latest", "web").exit_code == 0
    watch = rollouts.popen("rollout", "status", "web", "--watch", "--timeout", "0")
    try:
        time.sleep(2)
        assert watch.poll() is None, watch.communicate()
        assert rollouts.sh("controller", "run", "--until-idle").exit_code == 0
        out, err = watch.communicate(timeout=30)
    finally:
        watch.kill()
    assert watch.returncode == 0, (out, err)
    assert out.rstrip().endswith("web version 1 (attempt 1): Complete"), out


def test_undo_onto_the_same_spec_is_skipped(rollouts_on: Rollouts) -> None:
    """It made a new version; kubectl says `skipped rollback` and changes nothing."""
    r = rollouts_on
    assert r.sh("config", "create", "web", "--", "true").exit_code == 0
    assert r.sh("rollout", "latest", "web").exit_code == 0
    assert r.sh("controller", "run", "--until-idle").exit_code == 0
    before = r.event_count()
    skipped = r.sh("rollout", "undo", "web", "--to-revision", "1")
    assert skipped.exit_code == 0 and skipped.stdout == "web skipped rollback (the spec already matches revision 1)\n"
    assert r.event_count() == before
    assert r.sh("config", "set", "web", "--env", "A=1").exit_code == 0
    undone = r.sh("rollout", "undo", "web", "--to-revision", "1")
    assert undone.stdout == "web rolled back to revision 1 as version 2\n", undone


@pytest.mark.parametrize(
    "args",
    [
        ("rollout", "latest", "web", "--reason"),
        ("rollout", "abort", "web", "--reason"),
        ("freeze", "web", "--reason"),
        ("notify", "add", "s", "--url"),
    ],
)
def test_free_text_is_capped(rollouts: Rollouts, args: tuple[str, ...]) -> None:
    """`--reason` and `--url` had no cap: one command could store megabytes in the log for ever."""
    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0
    before = rollouts.event_count()
    text = "http://example.com/" if args[-1] == "--url" else ""
    err = one_error(rollouts.sh(*args, text + "x" * (2049 - len(text))), 2)
    assert "at most 2,048" in err
    assert rollouts.event_count() == before
    assert rollouts.sh(*args, text + "x" * (2048 - len(text))).exit_code in (0, 1)  # (abort: nothing open)


@pytest.mark.parametrize(
    "args",
    [
        ("config", "set", "nope", "--env", "A=1"),
        ("rollout", "latest", "nope"),
        ("rollout", "undo", "nope"),
        ("rollout", "abort", "nope"),
    ],
)
def test_a_write_against_a_missing_config_creates_nothing(
    rollouts_on: Rollouts, backend_store: str | None, args: tuple[str, ...]
) -> None:
    """It created the home and a log (a schema on PostgreSQL) before it said the config was not found."""
    err = one_error(rollouts_on.sh(*args), 4)
    assert "config 'nope' not found" in err
    assert not rollouts_on.home.exists()
    if backend_store:
        schema = backend_store.rsplit("=", 1)[1]
        with psycopg.connect(POSTGRES) as conn:
            made = conn.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone()
        assert made is not None and made[0] is None


def test_abort_of_a_deployment_that_never_started_runs_no_rollback(rollouts_on: Rollouts) -> None:
    """Freeze, latest, abort, unfreeze: a rollback deployer ran for a version that never ran (7.11: the
    spec is set back, an event, and nothing runs)."""
    r = rollouts_on
    assert r.sh("config", "create", "web", "--", "true").exit_code == 0
    assert r.sh("rollout", "latest", "web").exit_code == 0
    assert r.sh("controller", "run", "--until-idle").exit_code == 0
    assert r.sh("config", "set", "web", "--env", "A=2").exit_code == 0
    assert r.sh("freeze", "web", "--reason", "release week").exit_code == 0
    assert r.sh("rollout", "latest", "web").stdout == "2\n"
    assert r.sh("rollout", "abort", "web", "--reason", "not this one").exit_code == 0
    assert r.sh("unfreeze", "web").exit_code == 0
    assert r.sh("controller", "run", "--until-idle").exit_code == 0
    history = json.loads(r.sh("rollout", "history", "web", "-o", "json").stdout)
    assert [(d["version"], d["phase"]) for d in history] == [(1, "Complete"), (2, "Failed")], history
    deployers = json.loads(r.sh("deployers", "list", "--all", "-o", "json").stdout)
    assert [d["name"] for d in deployers] == ["web-1-deploy-1"], deployers
    assert json.loads(r.sh("config", "show", "web", "-o", "json").stdout)["spec"]["env"] == {}  # set back
    assert "SpecChanged" in r.sh("events", "web", "--type", "SpecChanged").stdout
    audit = r.sh("audit")
    assert audit.exit_code == 0, audit


def test_the_demo_deployers_print_no_unset_variable(rollouts: Rollouts) -> None:
    """The demo's shop deployer echoed `$GREETING`, which shop never sets: its logs read ` from shop-1-...`."""
    assert rollouts.sh("demo", timeout=180).exit_code == 0
    for name in ("web", "shop"):
        logs = rollouts.sh("logs", name, "--revision", "1")
        assert logs.exit_code == 0, logs
        assert not any(line.startswith(" from ") for line in logs.stdout.splitlines()), logs.stdout
    assert "shop serves 50% (step 1 of 2)" in rollouts.sh("logs", "shop", "--revision", "1").stdout


def test_a_program_that_cannot_be_executed_says_so_in_status(rollouts_on: Rollouts) -> None:
    """A mistyped `--verify` program paused as inconclusive with nothing saying "cannot execute" (7.11:
    `cannot execute PROGRAM: REASON` in `rollout status`, for a measurement and for a deployer)."""
    r = rollouts_on
    verify = ("--verify", "no-such-check --now", "--verify-count", "1", "--verify-interval", "0")
    assert r.sh("config", "create", "web", *verify, "--", "true").exit_code == 0
    assert r.sh("config", "create", "api", "--", "/no/such/deployer").exit_code == 0
    for name in ("web", "api"):
        assert r.sh("rollout", "latest", name).exit_code == 0
    assert r.sh("controller", "run", "--until-idle").exit_code == 0
    web = r.sh("rollout", "status", "web").stdout
    assert "measurement web-1-verify-1-1: cannot execute no-such-check: No such file or directory" in web, web
    api = r.sh("rollout", "status", "api")
    assert api.exit_code == 1 and "cannot execute /no/such/deployer: No such file or directory" in api.stdout, api
