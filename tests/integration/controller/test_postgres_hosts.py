"""Controllers on several hosts (separate homes) sharing one PostgreSQL log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)

DEPLOYER = (
    'echo "start $ROLLOUT_DEPLOYER $(date +%s.%N)" >> {gt}; sleep {s}; '
    'echo "end $ROLLOUT_DEPLOYER $(date +%s.%N)" >> {gt}'
)


def cli(home: Path, store: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "rollouts", "--home", str(home), "--store", store, *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def controller(home: Path, store: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rollouts.adapters.cli",
            "--home",
            str(home),
            "--store",
            store,
            "controller",
            "run",
            "--interval",
            "0.05",
            "-q",
            *args,
        ],
        env={**os.environ, **(env or {})},
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def ground_truth(path: Path) -> dict[str, list[tuple[str, float]]]:
    """Deployer name -> its (start|end, time) marks, written by the deployers themselves."""
    marks: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        what, name, when = line.split()
        marks[name].append((what, float(when)))
    return marks


def assert_each_started_once_and_no_overlap(marks: dict[str, list[tuple[str, float]]], now: float) -> None:
    intervals: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for name, events in marks.items():
        starts = [t for what, t in events if what == "start"]
        assert len(starts) == 1, f"{name} started {len(starts)} times"
        ends = [t for what, t in events if what == "end"]
        config = name.rsplit("-", 3)[0]
        intervals[config].append((starts[0], ends[0] if ends else now, name))
    for config, spans in intervals.items():
        spans.sort()
        for (_, end, a), (start, _, b) in zip(spans, spans[1:], strict=False):
            assert start >= end, f"{a} and {b} of {config} were alive at the same time"


def test_two_hosts_on_one_postgres_log_run_every_deployer_once(tmp_path: Path, postgres_url: str) -> None:
    from rollouts.adapters.home import Home
    from rollouts.adapters.service.application import new_meta
    from rollouts.adapters.service.bootstrap import open_app
    from rollouts.domain.spec import Spec

    gt = tmp_path / "gt"
    host_a, host_b = tmp_path / "a", tmp_path / "b"
    app = open_app(Home(tmp_path / "client"), postgres_url)
    configs = [f"app{i}" for i in range(50)]
    for name in configs:
        app.create_config(name, Spec(command=["sh", "-c", DEPLOYER.format(gt=gt, s=0)]), new_meta("t"))

    def round_of_rollouts() -> None:
        for name in configs:
            app.latest(name, None, True, new_meta("t"))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(app.config(n).open_revisions for n in configs):
            time.sleep(0.5)

    # One host alone, the other alone, then both at once: each claims (a controller that wakes
    # first may claim a whole round in one append), and the last round is raced.
    first = controller(host_a, postgres_url)
    controllers = [first]
    try:
        round_of_rollouts()
        first.terminate()
        assert first.wait(timeout=30) == 0
        controllers = [controller(host_b, postgres_url)]
        round_of_rollouts()
        controllers.append(controller(host_a, postgres_url))
        round_of_rollouts()
    finally:
        for c in controllers:
            c.terminate()
            c.wait(timeout=30)
    assert_each_started_once_and_no_overlap(ground_truth(gt), time.time())
    rows = json.loads(cli(host_a, postgres_url, "config", "list", "-o", "json").stdout)
    assert {(r["latest_version"], r["latest_phase"]) for r in rows} <= {(3, "Complete"), (3, "Failed")}
    assert (3, "Complete") in {(r["latest_version"], r["latest_phase"]) for r in rows}
    assert cli(host_b, postgres_url, "audit").returncode == 0
    claims = json.loads(cli(host_a, postgres_url, "events", "--type", "DeployerClaimed", "-o", "json").stdout)
    by_claimant = {c["data"]["claimant"] for c in claims}
    assert len(by_claimant) == 2, "both hosts should have claimed some deployments"
    assert not any(app.config(n).open_revisions for n in configs), "a round did not settle"


def test_a_killed_hosts_claims_end_lost_after_the_lease_and_nothing_runs_twice(
    tmp_path: Path, postgres_url: str
) -> None:
    gt = tmp_path / "gt"
    host_a, host_b = tmp_path / "a", tmp_path / "b"
    lease = {"ROLLOUTS_LEASE_SECONDS": "4"}
    cli(host_a, postgres_url, "config", "create", "web", "--", "sh", "-c", DEPLOYER.format(gt=gt, s=60))
    cli(host_a, postgres_url, "rollout", "latest", "web")
    doomed = controller(host_a, postgres_url, env=lease)
    deadline = time.monotonic() + 30
    while not (gt.exists() and "start" in gt.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gt.exists(), "the deployer never started"
    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    survivor = controller(host_b, postgres_url, env=lease)
    try:
        deadline = time.monotonic() + 30
        status = None
        while time.monotonic() < deadline:
            status = cli(host_b, postgres_url, "rollout", "status", "web")
            if status.returncode == 1:
                break
            time.sleep(0.3)
        assert status is not None and status.returncode == 1 and "lease expired" in status.stdout, status
        lost_at = time.time()
        # The shim on the dead host stopped its deployer before the lease ended.
        runtime = json.loads(cli(host_a, postgres_url, "deployers", "list", "-o", "json").stdout)
        assert [r["state"] for r in runtime] == ["lost"]
        killed_at = datetime.fromisoformat(runtime[0]["ended_at"]).timestamp()
        assert cli(host_b, postgres_url, "rollout", "retry", "web").returncode == 0
        cli(host_b, postgres_url, "config", "set", "web", "--", "true")  # the frozen spec still sleeps
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "web-1-deploy-2" not in gt.read_text():
            time.sleep(0.2)
    finally:
        survivor.terminate()
        survivor.wait(timeout=30)
    marks = ground_truth(gt)
    assert set(marks) == {"web-1-deploy-1", "web-1-deploy-2"}
    assert killed_at < lost_at
    marks["web-1-deploy-1"].append(("end", killed_at))  # its shim killed it: it wrote no end mark
    assert_each_started_once_and_no_overlap(marks, time.time())
    assert cli(host_b, postgres_url, "audit").returncode == 0


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("postgresql://postgres:s3cretpw@127.0.0.1:5999/test", "5999"),
        ("postgresql://nobody:s3cretpw@127.0.0.1:5432/test", "nobody"),
        ("postgresql://postgres:s3cretpw@127.0.0.1:5432/no_such_db", "no_such_db"),
    ],
)
def test_an_unusable_store_is_one_error_line_with_exit_5_and_no_password(tmp_path: Path, url: str, needle: str) -> None:
    (tmp_path / "h").mkdir()  # a missing home would add its own warning line (DESIGN 7.1, Homes)
    result = cli(tmp_path / "h", url, "config", "list")
    assert result.returncode == 5
    assert result.stderr.startswith("error:") and result.stderr.count("\n") == 1
    assert needle in result.stderr
    assert "s3cretpw" not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("damage", ["", "\n", "not-a-claimant-id\n"], ids=["empty", "a-newline", "other-text"])
def test_a_damaged_claimant_file_is_refused_and_no_host_runs_anothers_claim(
    tmp_path: Path, postgres_url: str, damage: str
) -> None:
    """An empty claimant id was every such home's: two hosts each took the other's claim for its own
    and both ran web-1-deploy-1 (the audit saw nothing: both claims named claimant '')."""
    gt = tmp_path / "gt"
    host_a, host_b = tmp_path / "a", tmp_path / "b"
    assert (
        cli(host_a, postgres_url, "config", "create", "web", "--", "sh", "-c", DEPLOYER.format(gt=gt, s=0)).returncode
        == 0
    )
    for host in (host_a, host_b):
        assert cli(host, postgres_url, "controller", "run", "--once", "-q").returncode == 0  # makes runtime/claimant
        (host / "runtime" / "claimant").write_text(damage)
    assert cli(host_a, postgres_url, "rollout", "latest", "web").returncode == 0
    for _ in range(2):
        for host in (host_a, host_b):
            result = cli(host, postgres_url, "controller", "run", "--once", "-q")
            assert result.returncode == 5, result
            assert result.stderr.startswith(f"error: {host / 'runtime' / 'claimant'} holds no claimant id"), result
            assert result.stderr.count("\n") == 1, result.stderr
    assert not gt.exists(), gt.read_text()
    claims = json.loads(cli(host_a, postgres_url, "events", "--type", "DeployerClaimed", "-o", "json").stdout)
    assert claims == []


def wait_for(check, seconds: float = 30) -> bool:  # noqa: ANN001 - a predicate
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def test_a_host_with_a_shorter_lease_does_not_end_a_live_hosts_claim(tmp_path: Path, postgres_url: str) -> None:
    """Each host reads ROLLOUTS_LEASE_SECONDS from its own environment. A host with 3 s ended the claim of a
    live host with 60 s as Lost; a retry then ran web-1-deploy-2 beside web-1-deploy-1 (audit: ok).
    A lease keeps its holder's length: the others wait that long."""
    gt = tmp_path / "gt"
    host_a, host_b = tmp_path / "a", tmp_path / "b"
    cli(host_a, postgres_url, "config", "create", "web", "--", "sh", "-c", DEPLOYER.format(gt=gt, s=8))
    long_lived = controller(host_a, postgres_url, env={"ROLLOUTS_LEASE_SECONDS": "60"})
    short = None
    try:
        assert cli(host_a, postgres_url, "rollout", "latest", "web").returncode == 0
        assert wait_for(lambda: gt.exists() and "start" in gt.read_text()), "the deployer never started"
        short = controller(host_b, postgres_url, env={"ROLLOUTS_LEASE_SECONDS": "3"})
        assert wait_for(lambda: "end web-1-deploy-1" in gt.read_text()), "the deployer never ended"
        status = cli(host_b, postgres_url, "rollout", "status", "web")
        assert wait_for(lambda: "Complete" in cli(host_b, postgres_url, "rollout", "status", "web").stdout), status
    finally:
        for proc in (long_lived, short):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
    assert set(ground_truth(gt)) == {"web-1-deploy-1"}
    lost = json.loads(cli(host_a, postgres_url, "events", "--type", "DeployerLost", "-o", "json").stdout)
    assert lost == []


def test_a_copy_of_a_home_is_refused_while_the_home_it_was_copied_from_runs(tmp_path: Path, postgres_url: str) -> None:
    """A home copied with its runtime/claimant (a second host made from a backup or an image) shared the id:
    both controllers took every claim for their own and each ran every deployer (audit: ok)."""
    import shutil

    gt = tmp_path / "gt"
    host_a, host_b = tmp_path / "a", tmp_path / "b"
    cli(host_a, postgres_url, "config", "create", "web", "--", "sh", "-c", DEPLOYER.format(gt=gt, s=0))
    assert cli(host_a, postgres_url, "controller", "run", "--once", "-q").returncode == 0
    shutil.copytree(host_a, host_b, symlinks=True)
    original = controller(host_a, postgres_url)
    try:
        copy = cli(host_b, postgres_url, "controller", "run", "--once", "-q")
        assert copy.returncode == 5, copy
        assert copy.stderr.startswith("error: claimant id ") and "If this home is a copy of that one" in copy.stderr, (
            copy
        )
        assert cli(host_a, postgres_url, "rollout", "latest", "web").returncode == 0
        assert wait_for(lambda: gt.exists() and "end web-1-deploy-1" in gt.read_text())
        assert cli(host_b, postgres_url, "controller", "run", "--once", "-q").returncode == 5
        # Given an id of its own, the copy is a host like any other.
        (host_b / "runtime" / "claimant").unlink()
        assert cli(host_b, postgres_url, "controller", "run", "--once", "-q").returncode == 0
    finally:
        original.terminate()
        original.wait(timeout=30)
    assert set(ground_truth(gt)) == {"web-1-deploy-1"}
    assert_each_started_once_and_no_overlap(ground_truth(gt), time.time())
