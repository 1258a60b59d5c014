"""`events --after P --until P --limit N` (7.3): paging through the log in position order."""

from __future__ import annotations

import json

from tests.conftest import Rollouts


def positions(rollouts: Rollouts, *args: str) -> list[int]:
    result = rollouts.run("events", "-o", "json", *args)
    assert result.exit_code == 0, result.stderr
    return [e["position"] for e in json.loads(result.stdout)]


def test_pages_cover_the_log_with_no_gap_and_no_repeat(rollouts: Rollouts) -> None:
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    for _ in range(4):
        assert rollouts.run("rollout", "latest", "web", "--supersede").exit_code == 0
    everything = positions(rollouts)
    assert len(everything) > 10
    seen: list[int] = []
    while page := positions(rollouts, "--after", str(seen[-1] if seen else 0), "--limit", "3"):
        assert len(page) <= 3
        seen += page
    assert seen == everything
    assert positions(rollouts, "--after", "2", "--until", "5") == [3, 4, 5]
    assert positions(rollouts, "web", "--until", "4", "--limit", "2") == [p for p in everything if p <= 4][:2]
