"""A home whose config ran analysis templates against a real HTTP server (tests/support/analysis_servers.py),
for the page's charts (DESIGN 7.9): the route test and the browser test build it the same way."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts

LONG = "result > 5 and result < 1000000 and not (result == 7 or result == 8 or result == 9 or result == 10)"
# name -> options: each asks the site's /json ({"a": {"b": [0.5, 2]}}) or /fail (503), so that version 1's
# steps hold a passed number, an inconclusive number and an inconclusive error with no value.
TEMPLATES = {
    "latency": ["/json", "--json-path", "$.a.b[0]", "--success", "result < 1", "--count", "2"],
    "ratio": ["/json", "--json-path", "$.a.b[1]", "--success", "result < 1", "--failure", LONG],
    "down": ["/fail", "--success", 'result == "ok"'],
    "cap": ["/json", "--json-path", "$.a.b[1]", "--success", "result < 1"],  # fails version 2 at once
}
PER_STEP = {"latency": 2, "ratio": 1, "down": 1}  # version 1's measurements of each template in each step


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def charted_home(rollouts: Rollouts, site: str) -> Rollouts:
    """web: version 1 (steps 50,100; latency, ratio, down) Complete; version 2 (latency, cap) Failed."""
    for name, (path, *options) in TEMPLATES.items():
        more = ["--count", "1", "--inconclusive-limit", "1"] if name in ("ratio", "down") else []
        provider = ["--provider", "http", "--url", site + path, "--interval", "0"]
        ok(rollouts.sh("analysis", "create", name, *provider, *options, *more))
    chosen = ["--analysis", "latency", "--analysis", "ratio", "--analysis", "down"]
    ok(rollouts.sh("config", "create", "web", "--steps", "50,100", *chosen, "--", "true"))
    ok(rollouts.sh("rollout", "latest", "web"))
    ok(rollouts.sh("controller", "run", "--until-idle", "--interval", "0.1", "--timeout", "120", "-q", timeout=150))
    ok(rollouts.sh("config", "set", "web", "--analysis", "latency", "--analysis", "cap"))
    ok(rollouts.sh("rollout", "latest", "web"))
    ok(rollouts.sh("controller", "run", "--until-idle", "--interval", "0.1", "--timeout", "120", "-q", timeout=150))
    return rollouts
