"""`--as-of POSITION|ISO` (7.3): status, history and config show as the log stood then."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from tests.conftest import Rollouts

pytestmark = pytest.mark.slow  # real subprocesses and stores

ASKED = (
    ("rollout", "status", "web"),
    ("rollout", "history", "web", "-o", "json"),
    ("rollout", "history", "web", "--revision", "1", "-o", "json"),
    ("config", "show", "web", "-o", "json"),
    ("config", "show", "web"),
)


def answers(rollouts: Rollouts, *extra: str, subprocess: bool = False) -> dict[tuple[str, ...], tuple[int, str]]:
    """What each asked command prints (in-process, or as a real subprocess)."""
    found = {}
    for args in ASKED:
        result = (rollouts.sh if subprocess else rollouts.run)(*args, *extra)
        found[args] = (result.exit_code, result.stdout)
    return found


def head(rollouts: Rollouts) -> int:
    return json.loads(rollouts.sh("log", "verify", "-o", "json").stdout)["head"]


def test_as_of_answers_what_the_commands_said_at_the_time(rollouts_on: Rollouts) -> None:
    steps = [
        ("config", "create", "web", "--env", "A=1", "--", "true"),
        ("rollout", "latest", "web", "--reason", "one"),
        ("controller", "run", "--until-idle", "--timeout", "30", "-q"),
        ("config", "set", "web", "--env", "A=2"),
        ("rollout", "latest", "web"),
        ("rollout", "cancel", "web"),
        ("rollout", "retry", "web"),
        ("controller", "run", "--until-idle", "--timeout", "30", "-q"),
    ]
    said = []
    for step in steps:
        assert rollouts_on.sh(*step).exit_code == 0, step
        time.sleep(0.01)
        moment = datetime.now(UTC).isoformat()
        time.sleep(0.01)
        said.append((head(rollouts_on), moment, answers(rollouts_on)))
    for position, _, then in said:
        assert answers(rollouts_on, "--as-of", str(position)) == then, position
    for _, moment, then in said[::3]:
        assert answers(rollouts_on, "--as-of", moment, subprocess=True) == then, moment


def test_as_of_before_the_config_existed_is_not_found(rollouts: Rollouts) -> None:
    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0
    assert rollouts.sh("rollout", "latest", "web").exit_code == 0
    assert rollouts.sh("config", "show", "web", "--as-of", "0").exit_code == 4
    assert rollouts.sh("rollout", "status", "web", "--as-of", "1").exit_code == 4  # no deployment yet
    assert rollouts.sh("rollout", "status", "web", "--as-of", "2000-01-01").exit_code == 4
