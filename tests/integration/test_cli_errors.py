"""Bad input to the CLI, in-process and as a subprocess: the right exit code, one `error:` line, nothing appended."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts

USAGE, MISSING, STORE = 2, 4, 5
HUGE = "9" * 20  # beyond SQLite's 64-bit INTEGER

BAD_NAMES = {
    "uppercase": "WEB",
    "mixed case": "Web",
    "64 characters": "a" * 64,
    "leading dash": "-lead",
    "trailing dash": "lead-",
    "underscore": "a_b",
    "dot": "web.example",
    "space": " web",
    "non-ascii": "wéb",
    "shell command": "web;rm -rf /",
    "command substitution": "$(reboot)",
    "path traversal": "../etc",
    "trailing newline": "web\n",
    "empty": "",
}

CASES = [
    *(pytest.param(["config", "create", "--", n, "true"], USAGE, id=f"name {k}") for k, n in BAD_NAMES.items()),
    pytest.param(["config", "create", "-lead", "--", "true"], USAGE, id="name that looks like an option"),
    pytest.param(["rollout", "latest", "WEB"], USAGE, id="latest with an uppercase name"),
    pytest.param(["config", "show", "../etc"], USAGE, id="show with a path for a name"),
    pytest.param(["rollout", "history", "web;id"], USAGE, id="history with an injected name"),
    pytest.param(["logs", "$(reboot)"], USAGE, id="logs with a substitution for a name"),
    pytest.param(["config", "create", "api"], USAGE, id="create with no command"),
    pytest.param(["config", "create", "api", "--"], USAGE, id="create with nothing after the dashes"),
    pytest.param(["config", "create", "api", "--", ""], USAGE, id="create with an empty command"),
    pytest.param(["config", "create", "api", "--env", "NOEQUALS", "--", "true"], USAGE, id="env without equals"),
    pytest.param(["config", "create", "api", "--env", "=v", "--", "true"], USAGE, id="env without a key"),
    pytest.param(["config", "create", "api", "--env", "1BAD=x", "--", "true"], USAGE, id="env key with a digit first"),
    pytest.param(["config", "set", "web", "--env", "NOEQUALS"], USAGE, id="set env without equals"),
    pytest.param(["config", "create", "api", "--timeout", "-5", "--", "true"], USAGE, id="negative timeout"),
    pytest.param(["config", "create", "api", "--timeout", "0", "--", "true"], USAGE, id="zero timeout"),
    pytest.param(["config", "create", "api", "--timeout", "86401", "--", "true"], USAGE, id="timeout over a day"),
    pytest.param(["config", "create", "api", "--timeout", "soon", "--", "true"], USAGE, id="timeout not a number"),
    pytest.param(["config", "set", "web", "--timeout", "0"], USAGE, id="set zero timeout"),
    pytest.param(["config", "create", "api", "--history-limit", "0", "--", "true"], USAGE, id="history limit zero"),
    pytest.param(["config", "set", "web", "--history-limit", "-1"], USAGE, id="set negative history limit"),
    pytest.param(["config", "create", "api", "--trigger", "always", "--", "true"], USAGE, id="unknown trigger"),
    pytest.param(["config", "create", "api", "--env", "A=\udcff", "--", "true"], USAGE, id="env value not utf-8"),
    pytest.param(["config", "create", "api", "--pre-hook", "'open", "--", "true"], USAGE, id="unbalanced hook quote"),
    pytest.param(
        ["config", "create", "api", "--pre-hook-policy", "retry", "--", "true"], USAGE, id="policy without a hook"
    ),
    pytest.param(["config", "create", "api", "--pass-env", "1BAD", "--", "true"], USAGE, id="pass-env digit first"),
    pytest.param(["config", "create", "api", "--pass-env", "A=b", "--", "true"], USAGE, id="pass-env with a value"),
    pytest.param(["config", "create", "api", "--pass-env", "MY-VAR", "--", "true"], USAGE, id="pass-env with a dash"),
    pytest.param(["config", "create", "api", "--pass-env", "", "--", "true"], USAGE, id="pass-env empty"),
    pytest.param(["config", "create", "api", "--pass-env", "ROLLOUT_CONFIG", "--", "true"], USAGE, id="pass ROLLOUT_"),
    pytest.param(["config", "set", "web", "--pass-env", "ROLLOUT_DEPLOYER"], USAGE, id="set pass-env ROLLOUT_"),
    pytest.param(["config", "set", "web", "--pass-env", "ROLLOUTS_STORE"], USAGE, id="pass the store URL"),
    pytest.param(["config", "set", "web", "--pass-env", "é"], USAGE, id="set pass-env non-ascii"),
    pytest.param(
        ["config", "create", "api", "--env", "A=1", "--pass-env", "A", "--", "true"], USAGE, id="set and passed"
    ),
    pytest.param(["config", "set", "nope", "--env", "A=1"], MISSING, id="set of an unknown config"),
    pytest.param(["config", "show", "nope"], MISSING, id="show of an unknown config"),
    pytest.param(["rollout", "latest", "nope"], MISSING, id="latest of an unknown config"),
    pytest.param(["rollout", "cancel", "nope"], MISSING, id="cancel of an unknown config"),
    pytest.param(["rollout", "retry", "nope"], MISSING, id="retry of an unknown config"),
    pytest.param(["rollout", "undo", "nope"], MISSING, id="undo of an unknown config"),
    pytest.param(["rollout", "pause", "nope"], MISSING, id="pause of an unknown config"),
    pytest.param(["rollout", "resume", "nope"], MISSING, id="resume of an unknown config"),
    pytest.param(["rollout", "status", "nope"], MISSING, id="status of an unknown config"),
    pytest.param(["rollout", "history", "nope"], MISSING, id="history of an unknown config"),
    pytest.param(["events", "nope"], MISSING, id="events of an unknown config"),
    pytest.param(["audit", "nope"], MISSING, id="audit of an unknown config"),
    pytest.param(["logs", "nope"], MISSING, id="logs of an unknown config"),
    pytest.param(["rollout", "history", "web", "--revision", "9"], MISSING, id="history of an unknown revision"),
    pytest.param(["rollout", "undo", "web", "--to-revision", "9"], MISSING, id="undo to an unknown revision"),
    pytest.param(["logs", "web", "--revision", "9"], MISSING, id="logs of an unknown revision"),
    pytest.param(["rollout", "history", "web", "--revision", "0"], USAGE, id="history of revision zero"),
    pytest.param(["rollout", "undo", "web", "--to-revision", HUGE], USAGE, id="undo to a huge revision"),
    pytest.param(
        ["rollout", "history", "web", "--revision", HUGE],
        USAGE,
        id="history of a huge revision",
    ),
    pytest.param(
        ["logs", "web", "--revision", HUGE],
        USAGE,
        id="logs of a huge revision",
    ),
    pytest.param(["deployers", "delete", "web-9-deploy-1"], MISSING, id="delete of an unknown deployer"),
    pytest.param(["events", "--since", "yesterday"], USAGE, id="since in words"),
    pytest.param(["events", "--since", "2026-13-01"], USAGE, id="since with month thirteen"),
    pytest.param(
        ["events", "--since", "9999-12-31T23:59:59-05:00"],
        USAGE,
        id="since past the year 9999 in UTC",
    ),
    pytest.param(
        ["events", "--since", "0001-01-01T00:00:00+05:00"],
        USAGE,
        id="since before the year 1 in UTC",
    ),
    pytest.param(["events", "--revision", "1"], USAGE, id="events revision without a name"),
    pytest.param(["--store", "mysql://x", "config", "list"], USAGE, id="mysql store"),
    pytest.param(["--store", "mysql://x", "rollout", "latest", "web"], USAGE, id="mysql store for a write"),
    pytest.param(["--store", "postgresql://", "config", "list"], USAGE, id="postgres store without parts"),
    pytest.param(["--store", "postgresql://u@127.0.0.1:1/db", "config", "list"], STORE, id="unreachable store"),
    pytest.param(
        ["--store", "postgresql://u@127.0.0.1:1/db?schema=a-b", "config", "list"], USAGE, id="postgres bad schema"
    ),
    pytest.param(["config", "list", "-o", "yaml"], USAGE, id="config list as yaml"),
    pytest.param(["config", "show", "web", "-o", "xml"], USAGE, id="config show as xml"),
    pytest.param(["rollout", "history", "web", "-o", "yaml"], USAGE, id="history as yaml"),
    pytest.param(["events", "-o", "csv"], USAGE, id="events as csv"),
    pytest.param(["audit", "-o", "yaml"], USAGE, id="audit as yaml"),
    pytest.param(["deployers", "list", "-o", "wide"], USAGE, id="deployers as wide"),
    pytest.param(["projections", "status", "-o", "yaml"], USAGE, id="projections status as yaml"),
    pytest.param(["rollout", "status", "web", "--watch", "--timeout", "-1"], USAGE, id="negative watch timeout"),
    pytest.param(["controller", "run", "--once", "--until-idle"], USAGE, id="once and until idle"),
    pytest.param(["frobnicate"], USAGE, id="unknown command"),
    pytest.param(["rollout", "latest", "web", "--force"], USAGE, id="unknown option"),
]


@pytest.fixture(params=["in-process", pytest.param("subprocess", marks=pytest.mark.slow)])
def invoke(request: pytest.FixtureRequest, rollouts: Rollouts) -> Callable[..., Result]:
    """A home holding config web with version 1 open; the CLI run one way or the other."""
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    assert rollouts.run("rollout", "latest", "web").exit_code == 0
    return rollouts.run if request.param == "in-process" else rollouts.sh


def assert_one_error_line(result: Result, code: int) -> None:
    assert result.exit_code == code, result
    assert "Traceback" not in result.stdout + result.stderr, result
    assert result.stderr.endswith("\n") and len(result.stderr.splitlines()) == 1, result
    assert result.stderr.startswith("error:"), result
    assert result.stdout == "", result


@pytest.mark.parametrize(("args", "code"), CASES)
def test_bad_input_is_one_error_line_and_appends_nothing(
    rollouts: Rollouts, invoke: Callable[..., Result], args: list[str], code: int
) -> None:
    before = rollouts.event_count()
    assert_one_error_line(invoke(*args), code)
    assert rollouts.event_count() == before


@pytest.mark.parametrize("name", ["a" * 63, "a", "0", "web-2"])
def test_names_at_the_edge_of_the_rule_are_accepted(rollouts: Rollouts, name: str) -> None:
    result = rollouts.run("config", "create", name, "--", "true")
    assert result.exit_code == 0, result
    assert rollouts.run("config", "show", name).exit_code == 0


def test_an_unreachable_store_error_hides_the_password(rollouts: Rollouts) -> None:
    rollouts.home.mkdir()  # a missing home would add its own warning line (DESIGN 7.1, Homes)
    result = rollouts.sh("--store", "postgresql://u:s3cr3t@127.0.0.1:1/db", "config", "list")
    assert_one_error_line(result, STORE)
    assert "s3cr3t" not in result.stderr and "***" in result.stderr


def test_a_revision_too_large_to_exist_is_a_usage_error(rollouts: Rollouts) -> None:
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    assert_one_error_line(rollouts.run("events", "web", "--revision", HUGE, "-o", "json"), USAGE)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["rollout", "status", "web", "--watch", "--timeout", "nan"], id="watch timeout nan"),
        pytest.param(["controller", "run", "--timeout", "nan"], id="controller timeout nan"),
        pytest.param(["controller", "run", "--interval", "inf", "--timeout", "1"], id="controller interval inf"),
    ],
)
def test_a_duration_that_is_not_finite_is_a_usage_error(rollouts: Rollouts, args: list[str]) -> None:
    # Subprocess only, killed after 5 s: in-process the nan cases would hang the test run.
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    assert rollouts.run("rollout", "latest", "web").exit_code == 0
    before = rollouts.event_count()
    assert_one_error_line(rollouts.sh(*args, timeout=5), USAGE)
    assert rollouts.event_count() == before
