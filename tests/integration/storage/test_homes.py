"""Homes (DESIGN 7.1): a new home is private, an existing directory is left as it is, reads never create one."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)

if TYPE_CHECKING:
    from tests.conftest import Rollouts

# (command, exit code, what stdout holds) as for an empty log
READS = [
    pytest.param(("events",), 0, "No events.", id="events"),
    pytest.param(("events", "-o", "json"), 0, "[]", id="events-json"),
    pytest.param(("audit",), 0, "ok: 0 events checked", id="audit"),
    pytest.param(("rollout", "status", "web"), 4, "", id="rollout-status"),
    pytest.param(("rollout", "history", "web"), 4, "", id="rollout-history"),
    pytest.param(("config", "list"), 0, "No configs.", id="config-list"),
    pytest.param(("config", "list", "-o", "json"), 0, "[]", id="config-list-json"),
    pytest.param(("config", "show", "web"), 4, "", id="config-show"),
    pytest.param(("projections", "status", "-o", "json"), 0, '"lag": 0', id="projections-status"),
    pytest.param(("deployers", "list"), 0, "No deployers.", id="deployers-list"),
    pytest.param(("logs", "web"), 4, "", id="logs"),
]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def scratch_tmp(tmp_path: Path, rollouts: Rollouts) -> Path:
    """A TMPDIR of the test's own, to see that a read leaves nothing behind there either."""
    folder = tmp_path / "tmpdir"
    folder.mkdir()
    rollouts.env["TMPDIR"] = str(folder)
    return folder


@pytest.mark.parametrize(("args", "code", "shown"), READS)
def test_a_read_on_a_missing_home_warns_answers_as_an_empty_log_and_creates_nothing(
    rollouts: Rollouts, scratch_tmp: Path, args: tuple[str, ...], code: int, shown: str
) -> None:
    home = rollouts.home.parent / "missing" / "typo"
    result = rollouts.sh("--home", str(home), *args)
    assert result.exit_code == code, result.stderr
    assert shown in result.stdout + result.stderr  # "No configs." and the like go to stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"warning: home {home} does not exist;"), result.stderr
    assert not any("Traceback" in line for line in lines), result.stderr
    assert not home.parent.exists(), "a read command created the home (or its parent)"
    assert list(scratch_tmp.iterdir()) == [], "a read command left files behind"


@pytest.mark.parametrize(
    "args", [("log", "verify"), ("log", "verify", "-o", "json"), ("log", "export"), ("projections", "rebuild")]
)
def test_the_log_of_a_missing_home_or_folder_is_not_verified_nor_exported_as_an_empty_one(
    rollouts: Rollouts, scratch_tmp: Path, args: tuple[str, ...]
) -> None:
    """An "ok" (with a log id made up on the spot) or an empty export of a mistyped home would pass for a real one;
    a rebuild there made that log (events.db, a log id), which `log verify` then said ok of."""
    home = rollouts.home.parent / "missing" / "typo"
    result = rollouts.sh("--home", str(home), *args)
    assert (result.exit_code, result.stdout) == (4, ""), result
    assert result.stderr == f"error: home {home} does not exist: there is no log to read (give --home or --store)\n"
    assert not home.parent.exists() and list(scratch_tmp.iterdir()) == []
    home.mkdir(parents=True)  # a directory, but no home: no events.db in it
    result = rollouts.sh("--home", str(home), *args)
    assert (result.exit_code, result.stdout) == (4, ""), result
    assert result.stderr.startswith(f"error: home {home} holds no event log (events.db):"), result.stderr
    assert list(home.iterdir()) == [] and list(scratch_tmp.iterdir()) == []


def test_an_empty_home_is_a_usage_error_not_the_current_directory(rollouts: Rollouts) -> None:
    result = rollouts.sh("--home", "", "config", "list")
    assert result.exit_code == 2 and result.stderr.startswith("error: Invalid value for '--home': is empty"), result
    assert list(rollouts.cwd.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("config", "list"), 0, "warning: "),
        (("events", "-o", "json"), 0, "warning: "),
        (("rollout", "status", "web"), 4, "warning: "),
        (("log", "verify"), 4, "error: "),
        (("log", "export"), 4, "error: "),
    ],
)
def test_a_read_on_a_postgresql_schema_with_no_log_creates_none(
    rollouts: Rollouts, postgres_url: str, args: tuple[str, ...], code: int, says: str
) -> None:
    """A misspelt schema was made, tables and a new log id, by a read (DESIGN 7.2: reads attempt no DDL).
    Reads answer as for an empty log, with a warning, as on a missing home; log verify and export refuse."""
    import psycopg

    from tests.conftest import POSTGRES

    rollouts.env["ROLLOUTS_STORE"] = postgres_url
    result = rollouts.sh(*args)
    assert result.exit_code == code, result
    assert result.stderr.startswith(f"{says}postgresql://") and "holds no log" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    schema = postgres_url.split("schema=")[1]
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        assert conn.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone() == (None,)
    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0  # a write makes the log
    again = rollouts.sh(*args)
    assert again.exit_code in (0, 4) and "holds no log" not in again.stderr, again  # 4: no deployment yet


def test_a_read_on_a_missing_home_answers_from_a_postgresql_store_as_it_is(
    rollouts: Rollouts, postgres_url: str, scratch_tmp: Path
) -> None:
    rollouts.env["ROLLOUTS_STORE"] = postgres_url
    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0
    home = rollouts.home.parent / "elsewhere"
    result = rollouts.sh("--home", str(home), "config", "list", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert [row["name"] for row in json.loads(result.stdout)] == ["web"]
    assert result.stderr.startswith(f"warning: home {home} does not exist;"), result.stderr
    assert not home.exists() and list(scratch_tmp.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="gives a home to another account: needs root (CI runs as root)")
@pytest.mark.parametrize("foreign", ["home", "runtime/logs", "projections"])
def test_a_home_another_account_owns_is_refused_and_nothing_outside_it_is_touched(
    rollouts: Rollouts, tmp_path: Path, foreign: str
) -> None:
    """Its owner could link the home's files anywhere: a deployer's log to a file of ours, which the
    controller would append to and `logs` print; its runtime.db to any database, which would be changed
    and made 0600."""
    victim = tmp_path / "victim"
    victim.write_text("ours alone\n")
    victim.chmod(0o600)
    home = tmp_path / "lent"
    (home / "runtime" / "logs").mkdir(parents=True)
    (home / "projections").mkdir()
    (home / "runtime" / "logs" / "web-1-deploy-1.log").symlink_to(victim)
    (home / "runtime" / "runtime.db").symlink_to(victim)
    nobody = 65534
    lent = home if foreign == "home" else home / foreign
    for path in [lent, *lent.rglob("*")]:
        os.chown(path, nobody, nobody, follow_symlinks=False)
    for args in (
        ("config", "create", "web", "--", "sh", "-c", "echo PWNED"),
        ("rollout", "latest", "web"),
        ("controller", "run", "--until-idle", "--timeout", "20", "-q"),
        ("logs", "web"),
        ("config", "list"),
    ):
        result = rollouts.sh("--home", str(home), *args)
        assert result.exit_code == 5, result
        assert result.stderr.startswith("error: ") and "belongs to uid 65534" in result.stderr, result.stderr
        assert "ours alone" not in result.stdout
    assert victim.read_text() == "ours alone\n" and mode(victim) == 0o600


@pytest.mark.parametrize(("folder_mode", "warns"), [(0o1777, True), (0o770, True), (0o755, False)])
def test_an_existing_directory_keeps_its_mode_and_a_writable_one_is_warned_about(
    rollouts: Rollouts, folder_mode: int, warns: bool
) -> None:
    home = rollouts.home.parent / "existing"
    home.mkdir()
    os.chmod(home, folder_mode)
    owner = home.stat().st_uid
    for args in (("config", "create", "web", "--", "true"), ("config", "list"), ("rollout", "latest", "web")):
        result = rollouts.sh("--home", str(home), *args)
        assert result.exit_code == 0, result.stderr
        warned = [line for line in result.stderr.splitlines() if "may be written by group or others" in line]
        assert len(warned) == (1 if warns else 0), result.stderr
        assert not warns or warned[0].startswith(f"warning: home {home} ")
    assert mode(home) == folder_mode, "the home's mode was changed"
    assert home.stat().st_uid == owner
    assert mode(home / "events.db") == 0o600
