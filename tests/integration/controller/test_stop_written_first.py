"""A stop is written before it is made (DESIGN 7.11): a deployer that traps TERM and asks `claim check`
hears 1 from the moment the controller (a timeout) or a user (`deployers delete`) decided to stop it, not
ok for the grace that follows the signal."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Rollouts

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)

# The deployer: checks its claim in a loop, each line saying whether TERM had come when the check began.
DEPLOYER = """
import signal, subprocess, sys
out = open(sys.argv[1], "a", buffering=1)
termed = []
signal.signal(signal.SIGTERM, lambda *_: (termed.append(1), out.write("TERM\\n")))
while True:
    after = bool(termed)
    code = subprocess.run([sys.executable, "-m", "rollouts", "claim", "check"], capture_output=True).returncode
    out.write(f"{'after' if after else 'before'} {code}\\n")
"""


def checks(path: Path) -> list[tuple[str, int]]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [(w, int(c)) for w, c in (line.split() for line in lines if line != "TERM")]


def until(predicate: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def assert_refused_after_term(seen: Path) -> None:
    after = [code for when, code in checks(seen) if when == "after"]
    assert after, seen.read_text()
    assert after == [1] * len(after), seen.read_text()  # never ok once the stop was decided


def create(r: Rollouts, tmp_path: Path, *options: str) -> Path:
    script, seen = tmp_path / "deployer.py", tmp_path / "seen"
    script.write_text(DEPLOYER)
    assert r.sh("config", "create", "web", *options, "--", sys.executable, str(script), str(seen)).exit_code == 0
    assert r.sh("rollout", "latest", "web").exit_code == 0
    return seen


def test_a_timeout_is_appended_before_the_deployer_hears_term(rollouts_on: Rollouts, tmp_path: Path) -> None:
    r = rollouts_on
    seen = create(r, tmp_path, "--timeout", "2")
    assert r.sh("controller", "run", "--until-idle", "--timeout", "90", timeout=120).exit_code == 0
    until(lambda: any(when == "after" for when, _ in checks(seen)))
    assert_refused_after_term(seen)
    history = json.loads(r.sh("rollout", "history", "web", "-o", "json").stdout)
    assert history[-1]["phase"] == "Failed" and history[-1]["reason"].startswith("timeout")
    types = [e["type"] for e in json.loads(r.sh("events", "-o", "json").stdout)]
    assert types.index("StopRequested") < types.index("DeployerFailed")
    assert r.sh("audit").exit_code == 0


def test_deployers_delete_is_appended_before_the_deployer_hears_term(rollouts_on: Rollouts, tmp_path: Path) -> None:
    r = rollouts_on
    seen = create(r, tmp_path)
    controller = r.popen("controller", "run", "-q")
    try:
        until(lambda: ("before", 0) in checks(seen))
        deleted = r.sh("deployers", "delete", "web-1-deploy-1")
        assert deleted.exit_code == 0, deleted
        until(lambda: json.loads(r.sh("rollout", "history", "web", "-o", "json").stdout)[-1]["phase"] == "Failed")
    finally:
        controller.send_signal(signal.SIGTERM)
        controller.wait(30)
    assert_refused_after_term(seen)
    events = json.loads(r.sh("events", "-o", "json").stdout)
    stop = next(e for e in events if e["type"] == "StopRequested")
    assert stop["data"]["reason"] == "deleted by user" and stop["actor"] == "tester@test"
    assert r.sh("audit").exit_code == 0
