"""`rollouts notify` without a controller: a name in use refused, sinks listed and removed, a name used again
(bad input to it is in the table of tests/integration/cli/test_cli_errors.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.conftest import Rollouts


def test_a_sink_name_in_use_is_refused_and_free_again_once_removed(rollouts: Rollouts) -> None:
    """Other bad input to `notify` is in the table of tests/integration/cli/test_cli_errors.py."""
    r = rollouts
    assert r.run("notify", "add", "ops", "--url", "http://127.0.0.1:9/x").exit_code == 0
    before = r.event_count()
    result = r.run("notify", "add", "ops", "--url", "http://127.0.0.1:9/y")
    assert (result.exit_code, result.stdout) == (1, ""), result
    assert result.stderr.startswith("error: ") and "already exists" in result.stderr and result.stderr.count("\n") == 1
    assert r.event_count() == before
    assert r.run("notify", "remove", "ops").exit_code == 0
    assert json.loads(r.run("notify", "list", "-o", "json").stdout) == []
    assert r.run("notify", "add", "ops", "--url", "http://127.0.0.1:9/z").exit_code == 0  # a name can be used again


def test_a_password_in_a_sink_url_is_shown_as_stars_by_every_read(rollouts: Rollouts) -> None:
    """DESIGN 6: a password never appears in output. The log keeps it whole (the notifier needs it)."""
    r = rollouts
    assert r.run("notify", "add", "ops", "--url", "https://bot:hunter2@hooks.example.com/x").exit_code == 0
    listed = r.run("notify", "list")
    assert "https://bot:***@hooks.example.com/x" in listed.stdout
    (sink,) = json.loads(r.run("notify", "list", "-o", "json").stdout)
    assert sink["url"] == "https://bot:***@hooks.example.com/x"
    events = r.run("events", "-o", "json")
    assert '"url": "https://bot:***@hooks.example.com/x"' in events.stdout
    assert all("hunter2" not in out for out in (listed.stdout, events.stdout, r.run("events").stdout))
    for bad in ("https://bot:hunter2@hooks.example.com:99999/x", "https://bot:hunter2@hooks.example.com/x y"):
        refused = r.run("notify", "add", "other", "--url", bad)  # a refused URL's message too
        assert refused.exit_code == 2 and "bot:***@" in refused.stderr and "hunter2" not in refused.stderr


def test_a_sink_lease_has_one_holder_until_it_expires_or_is_released(tmp_path: Path) -> None:
    from rollouts.adapters.home import Home
    from rollouts.adapters.notify.lease import SinkLeases
    from rollouts.adapters.service.bootstrap import open_app

    app = open_app(Home(tmp_path / "home"), None)
    try:
        first = SinkLeases(app.recorder, "one", seconds=1.5)
        second = SinkLeases(app.recorder, "two", seconds=1.5)
        assert first.hold("ops", 0.2) and not second.hold("ops", 0.2) and second.hold("other", 0.2)
        time.sleep(1.6)  # `one` died without renewing: its lease runs out
        assert second.hold("ops", 0.2) and not first.hold("ops", 0.0)
        second.release("ops")
        assert first.hold("ops", 0.2)
    finally:
        app.close()
