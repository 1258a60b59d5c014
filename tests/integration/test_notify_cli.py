"""`rollouts notify` without a controller: bad input refused with one line and nothing appended,
sinks listed and removed, and a name used again."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.conftest import Rollouts


def test_bad_input_is_one_error_line_and_appends_nothing(rollouts: Rollouts) -> None:
    r = rollouts
    assert r.run("notify", "add", "ops", "--url", "http://127.0.0.1:9/x").exit_code == 0
    before = r.event_count()
    cases = [
        (("notify", "add", "ops", "--url", "http://127.0.0.1:9/y"), 1, "already exists"),
        (("notify", "add", "x", "--url", "ftp://h/"), 2, "not an http"),
        (("notify", "add", "x", "--url", "http://h/", "--on", "done"), 2, "unknown kind 'done'"),
        (("notify", "add", "Bad_Name", "--url", "http://h/"), 2, "DNS-1123"),
        (("notify", "remove", "nope"), 4, "sink 'nope' not found"),
    ]
    for argv, code, text in cases:
        result = r.run(*argv)
        assert (result.exit_code, result.stdout) == (code, ""), (argv, result)
        assert result.stderr.startswith("error: ") and text in result.stderr and result.stderr.count("\n") == 1
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
    from adapters.eventstore import open_app
    from adapters.home import Home
    from adapters.notify.lease import SinkLeases

    app = open_app(Home(tmp_path / "home"), None)
    try:
        first = SinkLeases(app.recorder.datastore, "one", seconds=1.5)
        second = SinkLeases(app.recorder.datastore, "two", seconds=1.5)
        assert first.hold("ops", 0.2) and not second.hold("ops", 0.2) and second.hold("other", 0.2)
        time.sleep(1.6)  # `one` died without renewing: its lease runs out
        assert second.hold("ops", 0.2) and not first.hold("ops", 0.0)
        second.release("ops")
        assert first.hold("ops", 0.2)
    finally:
        app.close()
