"""`rollouts measure TEMPLATE` (DESIGN 7.9, by hand): one measurement now, its arguments from --arg, the
config or the defaults, its rollout placeholders from the config's latest deployment; the log unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from rollouts.adapters.identity import new_meta
from rollouts.adapters.service.bootstrap import bootstrap
from rollouts.domain.analysis import TemplateSpec
from rollouts.domain.analysis_template import AnalysisTemplate
from tests.conftest import Rollouts
from tests.support.analysis_servers import Site, serving_site

pytestmark = pytest.mark.slow


@pytest.fixture
def site() -> Iterator[Site]:
    """A real HTTP server on loopback (tests/support/analysis_servers.py)."""
    yield from serving_site()


def record(rollouts: Rollouts, name: str, delete: bool = False, **spec: object) -> None:
    """A template in the log (as `analysis create` records one), deleted after when asked."""
    app = bootstrap(rollouts.home, rollouts.store).open_app()
    try:
        data = TemplateSpec.model_validate(spec).model_dump(mode="json", exclude_none=True)
        template = AnalysisTemplate(template=name, spec=data, reason=None, meta=new_meta("tester@test"))
        if delete:
            template.delete(new_meta("tester@test"))
        app.save(template)
    finally:
        app.close()


def head(rollouts: Rollouts) -> object:
    events = json.loads(rollouts.sh("events", "-o", "json").stdout)
    return (len(events), events[-1]["position"] if events else None)


def test_measure_runs_one_measurement_and_appends_nothing(rollouts_on: Rollouts, site: Site) -> None:
    rollouts = rollouts_on
    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0
    record(
        rollouts,
        "latency",
        provider="http",
        url=f"{site.address}/json?svc={{{{args.service}}}}",
        json_path="$.a.b[0]",
        success="result < 1",
        args={"service": "api"},
    )
    before = head(rollouts)
    done = rollouts.sh("measure", "latency")
    assert (done.exit_code, done.stdout) == (0, "passed: value 0.5\n"), done.stderr
    assert site.seen[-1].path == "/json?svc=api"  # the default
    as_json = rollouts.sh("measure", "latency", "--arg", "service=web", "-o", "json")
    assert (as_json.exit_code, json.loads(as_json.stdout)) == (0, {"outcome": "passed", "value": 0.5, "error": None})
    assert site.seen[-1].path == "/json?svc=web"
    assert head(rollouts) == before
    for name in ("nope", "gone"):
        if name == "gone":
            record(rollouts, "gone", delete=True, provider="http", url=site.address)
        missing = rollouts.sh("measure", name)
        assert (missing.exit_code, missing.stderr.strip()) == (4, f"error: analysis template {name} not found")


def test_arguments_come_from_arg_then_the_config_then_the_defaults(rollouts: Rollouts, site: Site) -> None:
    record(
        rollouts,
        "ask",
        provider="http",
        url=f"{site.address}/echo?s={{{{args.service}}}}&z={{{{args.zone}}}}",
        args={"service": None, "zone": "eu"},
    )
    created = rollouts.run(
        "config", "create", "web", "--analysis", "ask", "--analysis-arg", "service=cfg", "--", "true"
    )
    assert created.exit_code == 0, created
    lacking = rollouts.run("measure", "ask")
    assert lacking.exit_code == 2 and "'service'" in lacking.stderr and not site.seen
    assert rollouts.run("measure", "ask", "--config", "web").exit_code == 0
    assert site.seen[-1].path == "/echo?s=cfg&z=eu"
    assert rollouts.run("measure", "ask", "--config", "web", "--arg", "service=cli", "--arg", "zone=us").exit_code == 0
    assert site.seen[-1].path == "/echo?s=cli&z=us"
    unknown = rollouts.run("measure", "ask", "--arg", "colour=red", "--arg", "service=a")
    assert unknown.exit_code == 2 and "colour" in unknown.stderr
    assert rollouts.run("measure", "ask", "--config", "nope").exit_code == 4


def test_rollout_placeholders_need_a_config_and_take_its_latest_deployment(rollouts: Rollouts, site: Site) -> None:
    assert rollouts.run("config", "create", "web", "--steps", "20,100", "--", "true").exit_code == 0
    record(
        rollouts,
        "canary",
        provider="http",
        url=f"{site.address}/echo?c={{{{rollout.config}}}}&v={{{{rollout.version}}}}&a={{{{rollout.attempt}}}}"
        "&s={{rollout.step}}&w={{rollout.weight}}",
    )
    refused = rollouts.run("measure", "canary")
    assert refused.exit_code == 2 and "--config" in refused.stderr
    assert rollouts.run("measure", "canary", "--config", "web").exit_code == 4  # no deployment yet
    assert rollouts.run("rollout", "latest", "web").exit_code == 0
    assert rollouts.run("measure", "canary", "--config", "web").exit_code == 0
    assert site.seen[-1].path == "/echo?c=web&v=1&a=1&s=1&w=20"
    assert not site.seen[-1].path.count("{")


def test_a_command_template_runs_the_command_by_the_exit_rule(rollouts: Rollouts) -> None:
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    for name, script, timeout in (
        ("ok", "exit 0", 30),
        ("bad", "exit 1", 30),
        ("odd", "exit 3", 30),
        ("slow", "sleep 20", 1),
    ):
        record(rollouts, name, provider="command", command=["sh", "-c", script], timeout=timeout)
    runs = [rollouts.sh("measure", name, timeout=15) for name in ("ok", "bad", "odd", "slow")]
    assert [(run.exit_code, run.stdout) for run in runs] == [
        (0, "passed: value none\n"),
        (1, "failed: value none\n"),
        (2, "inconclusive: value none: exit code 3\n"),
        (2, "inconclusive: value none: timed out after 1 s\n"),
    ]
