"""One import name: an install adds `rollouts` and nothing else, and the log keeps its topics."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rollouts.domain.deployment import Deployment
from rollouts.domain.topics import stored_topic
from tests.conftest import Rollouts

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


def test_a_wheel_installs_the_package_rollouts_and_nothing_else(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy: setuptools builds in the source's build/ folder
    ignored = shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "__pycache__", ".ruff_cache")
    shutil.copytree(ROOT, source, ignore=ignored)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path, source],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("rollouts-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"rollouts"}
    names = zipfile.ZipFile(wheel).namelist()
    assert "rollouts/domain/deployment.py" in names and "rollouts/adapters/runtime/shim.py" in names
    assert not [n for n in names if n.startswith(("rollouts/tests/", "rollouts/bench/"))]


def test_a_users_own_domain_package_does_not_break_the_tool(rollouts: Rollouts) -> None:
    # The user's project, where the command runs, has packages named as our folders are.
    for name in ("domain", "projections", "adapters"):
        (rollouts.cwd / name).mkdir()
        (rollouts.cwd / name / "__init__.py").write_text("raise ImportError('the user project')\n")
    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0
    assert rollouts.sh("rollout", "latest", "web").stdout.strip() == "1"
    ran = rollouts.sh("controller", "run", "--until-idle", "--timeout", "30")
    assert ran.exit_code == 0, ran.stderr
    assert "Complete" in rollouts.sh("rollout", "history", "web").stdout


def test_python_dash_m_rollouts_is_the_command_line(tmp_path: Path) -> None:
    ran = subprocess.run([sys.executable, "-m", "rollouts", "--help"], cwd=tmp_path, capture_output=True, text=True)
    assert ran.returncode == 0 and "Usage: rollouts" in ran.stdout


def test_events_are_stored_under_the_topics_logs_have_always_held(rollouts: Rollouts) -> None:
    rollouts.run("config", "create", "web", "--", "true")
    rollouts.run("rollout", "latest", "web")
    with sqlite3.connect(rollouts.home / "events.db") as conn:
        topics = {t for (t,) in conn.execute("SELECT topic FROM stored_events")}
    assert topics >= {"domain.config:DeploymentConfig.Registered", "domain.deployment:Deployment.Created"}
    assert all(t.startswith("domain.") for t in topics), topics
    assert stored_topic(Deployment.Created) == "domain.deployment:Deployment.Created"
