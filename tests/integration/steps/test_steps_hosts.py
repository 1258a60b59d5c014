"""A paused rollout outlives its controller's host (DESIGN 7.6): on a shared PostgreSQL log, a claim with
nothing running is not ended by lease expiry; the next controller goes on with it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.integration.controller.test_postgres_hosts import cli

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)

LEASE = {"ROLLOUTS_LEASE_SECONDS": "3"}


def test_a_paused_claim_of_a_gone_host_is_taken_over_not_lost(tmp_path: Path, postgres_url: str) -> None:
    host_a, host_b = tmp_path / "a", tmp_path / "b"
    trace = tmp_path / "trace"
    deploy = f'echo "$ROLLOUT_DEPLOYER" >> {trace}'
    created = cli(host_a, postgres_url, "config", "create", "web", "--steps", "10,100", "--step-pause", "manual",
                  "--", "sh", "-c", deploy)  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert cli(host_a, postgres_url, "rollout", "latest", "web").returncode == 0
    first = cli(host_a, postgres_url, "controller", "run", "--until-idle", "--timeout", "60", env=LEASE)
    assert first.returncode == 0, first.stderr  # paused for a human: idle, and host a is gone
    time.sleep(4)  # past host a's lease
    second = cli(host_b, postgres_url, "controller", "run", "--until-idle", "--timeout", "60", env=LEASE)
    assert second.returncode == 0, second.stderr
    status = cli(host_b, postgres_url, "rollout", "status", "web").stdout
    assert "Running" in status and "paused after step 1" in status, status
    [taken] = json.loads(cli(host_b, postgres_url, "events", "--type", "ClaimTaken", "-o", "json").stdout)
    [claimed] = json.loads(cli(host_b, postgres_url, "events", "--type", "DeployerClaimed", "-o", "json").stdout)
    assert taken["data"]["previous"] == claimed["data"]["claimant"] != taken["data"]["claimant"]
    assert cli(host_b, postgres_url, "rollout", "promote", "web").returncode == 0
    third = cli(host_b, postgres_url, "controller", "run", "--until-idle", "--timeout", "60", env=LEASE)
    assert third.returncode == 0, third.stderr
    assert "Complete" in cli(host_b, postgres_url, "rollout", "status", "web").stdout
    assert trace.read_text().split() == ["web-1-deploy-1-step-1", "web-1-deploy-1-step-2"]
    assert cli(host_b, postgres_url, "audit").returncode == 0
