"""An auditor's read-only home (DESIGN 7.11): `log verify`, `audit`, `events`, `config show` and `rollout
status|history` answer on a home and log that cannot be written, and write nothing there; a write says so.

Two ways a home cannot be written: a real read-only bind mount (needs root), and modes (0500 folders,
0400 files), which bind root only without its capabilities (the test drops them with setpriv)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Result, Rollouts

pytestmark = pytest.mark.slow  # real subprocesses, a controller, a mount, PostgreSQL

READS = (
    ("log", "verify"),
    ("audit",),
    ("events",),
    ("config", "show", "web"),
    ("rollout", "status", "web"),
    ("rollout", "history", "web"),
    ("rollout", "history", "web", "--revision", "1"),
)


def tree(home: Path) -> dict[str, tuple[int, float, str]]:
    """Every file and folder under `home`: mode, modification time and content hash (what a write changes)."""
    found = {}
    for path in sorted([home, *home.rglob("*")]):
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        found[str(path.relative_to(home))] = (st.st_mode, st.st_mtime, digest)
    return found


def a_deployed_home(r: Rollouts) -> dict[tuple[str, ...], str]:
    """Make `web` version 1 Complete in `r`'s home; what each read prints while the home is writable."""
    assert r.sh("config", "create", "web", "--", "true").exit_code == 0
    assert r.sh("rollout", "latest", "web").exit_code == 0
    assert r.sh("controller", "run", "--until-idle").exit_code == 0
    before = {}
    for args in READS:
        result = r.sh(*args)
        assert result.exit_code == 0, (args, result)
        before[args] = result.stdout
    return before


def check_reads(r: Rollouts, before: dict[tuple[str, ...], str], run: object = None) -> None:
    """Each read answers as before, and nothing under the home changes; a write exits 5 saying why."""
    sh = run or r.sh
    files = tree(r.home)
    for args in READS:
        result: Result = sh(*args)  # type: ignore[operator]
        assert result.exit_code == 0, (args, result)
        assert result.stdout == before[args], args
        assert "cannot be written" in result.stderr
    latest: Result = sh("rollout", "latest", "web")  # type: ignore[operator]
    assert latest.exit_code == 5, latest
    assert latest.stderr.startswith("error: ") and latest.stderr.count("\n") == 1, latest.stderr
    assert "cannot be written (read-only)" in latest.stderr
    assert tree(r.home) == files


@pytest.fixture
def mounted(rollouts_on: Rollouts) -> Iterator[Rollouts]:
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root (the modes test covers other accounts)")
    yield rollouts_on
    subprocess.run(["umount", str(rollouts_on.home)], capture_output=True, check=False)


def test_reads_on_a_read_only_mount(mounted: Rollouts) -> None:
    """Every command, `log verify` and `audit` included, exited 5: Read-only file system: runtime/init.lock."""
    before = a_deployed_home(mounted)
    home = str(mounted.home)
    subprocess.run(["mount", "--bind", home, home], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", home], check=True)
        check_reads(mounted, before)
    finally:
        subprocess.run(["umount", home], check=True)


def test_reads_on_a_home_its_modes_make_read_only(rollouts_on: Rollouts) -> None:
    """The same for an auditor's copy whose modes allow no writing (0500 folders, 0400 files). Root writes
    whatever the modes say: as root, the commands run without capabilities (setpriv), as an owner would."""
    r = rollouts_on
    before = a_deployed_home(r)
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("as root the modes bind only without capabilities, and setpriv is not installed")
        prefix = ["setpriv", "--bounding-set=-all", "--"]
    for path in [r.home, *r.home.rglob("*")]:
        path.chmod(0o500 if path.is_dir() else 0o400)

    def sh(*args: str) -> Result:
        proc = subprocess.run(
            [*prefix, sys.executable, "-m", "rollouts", *args],
            cwd=r.cwd,
            env=r.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    try:
        check_reads(r, before, sh)
    finally:
        for path in [r.home, *r.home.rglob("*")]:
            path.chmod(0o700 if path.is_dir() else 0o600)
