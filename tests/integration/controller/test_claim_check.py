"""Fencing (DESIGN 7.7): every deployer gets ROLLOUT_CLAIM, ROLLOUT_HOME and ROLLOUT_STORE, and `rollouts claim
check` says whether its claim still holds: 0 while it is current and its claimant's lease is live, 1 once
it ended or was replaced or the lease expired, 5 when the log cannot be reached."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Rollouts

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


def wait_for(path: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().endswith("\n"):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.05)
    return path.read_text()


def test_a_deployer_checks_its_claim_and_the_claim_ends_with_its_attempt(rollouts_on: Rollouts, tmp_path: Path) -> None:
    r = rollouts_on
    seen = tmp_path / "seen"
    rollouts = Path(sys.executable).parent / "rollouts"  # this environment's, activated or not
    script = (
        f'echo "$ROLLOUT_CLAIM $ROLLOUT_STORE" > {seen}.tmp; {rollouts} claim check >> {seen}.tmp;'
        f' echo "rc=$?" >> {seen}.tmp; mv {seen}.tmp {seen}'
    )
    assert r.sh("config", "create", "web", "--", "sh", "-c", script).exit_code == 0
    r.sh("rollout", "latest", "web")
    assert r.sh("controller", "run", "--until-idle", "--timeout", "60").exit_code == 0
    claim_line, said, code = wait_for(seen).splitlines()
    claim, _, store = claim_line.partition(" ")
    assert code == "rc=0" and said.startswith("ok: web version 1 (attempt 1) is Running"), said
    if r.store:
        assert store == r.store and "@" in store and ":" not in store.split("@")[0].removeprefix("postgresql://")
    else:
        assert store == ""
    log_id = json.loads(r.sh("log", "verify", "-o", "json").stdout)["log_id"]
    assert claim.split(":")[0] == log_id
    ended = r.sh("claim", "check", claim)
    assert ended.exit_code == 1 and "Complete: the claim has ended" in ended.stdout
    through_click = r.sh("--home", str(r.home), "claim", "check", claim)  # not the fast path: the same check
    assert (through_click.exit_code, through_click.stdout) == (ended.exit_code, ended.stdout)
    # In a deployer, its ROLLOUT_HOME wins over a ROLLOUTS_HOME it was given, on both paths.
    deployer = {"ROLLOUT_HOME": str(r.home), "ROLLOUTS_HOME": str(tmp_path / "elsewhere")}
    fast = r.sh("claim", "check", claim, env=deployer)
    slow = r.sh("--as", "a-deployer", "claim", "check", claim, env=deployer)  # (a global option: click's path)
    assert (fast.exit_code, fast.stdout) == (slow.exit_code, slow.stdout) == (ended.exit_code, ended.stdout)
    document = json.loads(r.sh("claim", "check", claim, "-o", "json").stdout)
    assert document["holds"] is False and document["claim"] == claim


def test_a_retry_replaces_the_claim_and_an_expired_lease_ends_it(rollouts: Rollouts, tmp_path: Path) -> None:
    r = rollouts
    r.env["ROLLOUTS_LEASE_SECONDS"] = "2"
    seen = tmp_path / "claim"
    assert r.sh("config", "create", "web", "--", "sh", "-c", f"echo $ROLLOUT_CLAIM > {seen}; sleep 30").exit_code == 0
    r.sh("rollout", "latest", "web")
    controller = r.popen("controller", "run", "-q")
    try:
        claim = wait_for(seen).strip()
        assert r.sh("claim", "check", claim).exit_code == 0
    finally:
        controller.send_signal(signal.SIGKILL)  # the host dies: its lease runs out by the database's clock
        controller.wait(30)
    time.sleep(2.5)
    expired = r.sh("claim", "check", claim)
    assert expired.exit_code == 1 and "lease has expired" in expired.stdout
    assert r.sh("rollout", "cancel", "web").exit_code == 0  # the same home's next controller stops it
    assert r.sh("controller", "run", "--until-idle", "--timeout", "60").exit_code == 0
    assert r.sh("rollout", "retry", "web").exit_code == 0
    seen.unlink()
    controller = r.popen("controller", "run", "-q")
    try:
        newer = wait_for(seen).strip()
        assert newer != claim and r.sh("claim", "check", newer).exit_code == 0
        replaced = r.sh("claim", "check", claim)
        assert replaced.exit_code == 1 and "replaced it" in replaced.stdout, replaced.stdout
    finally:
        controller.send_signal(signal.SIGTERM)
        controller.wait(30)


def test_no_reachable_log_is_exit_5_and_a_bad_claim_is_a_usage_error(rollouts: Rollouts) -> None:
    claim = "0123456789abcdef0123456789abcdef:7"
    down = rollouts.sh("--store", "postgresql://postgres@127.0.0.1:1/test?connect_timeout=2", "claim", "check", claim)
    assert down.exit_code == 5 and down.stderr.startswith("error: ") and "Traceback" not in down.stderr
    for bad in ("nope", "0123:7", f"{claim}x"):
        refused = rollouts.sh("claim", "check", bad)
        assert refused.exit_code == 2 and "LOG_ID:POSITION" in refused.stderr
    missing = rollouts.sh("claim", "check")
    assert missing.exit_code == 2 and "ROLLOUT_CLAIM" in missing.stderr


def test_claim_check_starts_without_the_command_lines_imports(rollouts: Rollouts) -> None:
    """A deployer runs it before each side effect: click, pydantic and the application stay unimported."""
    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0
    claim = "0123456789abcdef0123456789abcdef:1"
    result = rollouts.sh("claim", "check", claim, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert result.exit_code == 1 and result.stdout.startswith("ended: ")
    imported = {line.rpartition("|")[2].strip() for line in result.stderr.splitlines() if "|" in line}
    assert "rollouts.adapters.service.claims" in imported
    assert not imported & {"click", "pydantic", "eventsourcing.application", "rollouts.adapters.service.application"}
