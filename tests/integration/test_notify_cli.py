"""`rollouts notify` without a controller: bad input refused with one line and nothing appended,
sinks listed and removed, and a name used again."""

from __future__ import annotations

import json

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
