"""Sink secrets (DESIGN 7.8): a URL's user info is sent as basic auth and never printed; with --url-env
the log keeps only a variable's name and the controller reads the URL at each delivery."""

from __future__ import annotations

import base64
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Rollouts

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, where `bench` is
from bench.shared.sink_server import SinkServer  # noqa: E402

pytestmark = pytest.mark.slow
FAST = {"ROLLOUTS_NOTIFY_TIMEOUT": "1", "ROLLOUTS_NOTIFY_LEASE_SECONDS": "3"}
PASSWORD = "pa:ss@w0rd"  # percent-encoded in the URL, as a user writes a password with ':' or '@'


def status(r: Rollouts) -> dict[str, Any]:
    return json.loads(r.sh("notify", "status", "-o", "json").stdout)[0]


def until(predicate: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def everything_printed(r: Rollouts) -> str:
    commands = (["notify", "list"], ["notify", "list", "-o", "json"], ["events", "-o", "json"], ["events"])
    return "".join(r.sh(*c).stdout + r.sh(*c).stderr for c in commands)


def test_a_urls_user_and_password_go_as_basic_auth_and_are_never_printed(rollouts: Rollouts) -> None:
    r = rollouts
    r.env.update(FAST)
    expected = "Basic " + base64.b64encode(f"ops:{PASSWORD}".encode()).decode()
    with SinkServer(authorization=expected) as sink:
        url = sink.url.replace("http://", "http://ops:pa%3Ass%40w0rd@")
        added = r.sh("notify", "add", "ops", "--url", url, "--on", "triggered")
        assert (
            added.exit_code == 0 and "warning: the URL has a password" in added.stderr and "--url-env" in added.stderr
        )
        r.sh("config", "create", "web", "--", "true")
        r.sh("rollout", "latest", "web")
        controller = r.popen("controller", "run", "-q")
        try:
            until(lambda: sink.ok_count >= 1)
        finally:
            controller.send_signal(signal.SIGTERM)
            controller.wait(30)
        assert [g.authorization for g in sink.delivered()] == [expected]
    printed = everything_printed(r)
    assert "ops:***@127.0.0.1" in printed and "w0rd" not in printed


def test_url_env_keeps_only_the_name_and_a_missing_variable_is_a_retried_failure(
    rollouts: Rollouts, tmp_path: Path
) -> None:
    r = rollouts
    r.env.update(FAST)
    with SinkServer() as sink:
        secret = sink.url + "?token=t0p-s3cret"
        added = r.sh("notify", "add", "chat", "--url-env", "CHAT_HOOK", "--on", "triggered")
        assert added.exit_code == 0 and "warning" not in added.stderr
        r.sh("config", "create", "web", "--", "true")
        r.sh("rollout", "latest", "web")
        r.env.pop("CHAT_HOOK", None)
        without = r.popen("controller", "run", "-q")
        try:
            until(lambda: status(r)["last_error"] is not None)
        finally:
            without.send_signal(signal.SIGTERM)
            without.wait(30)
        assert "CHAT_HOOK" in status(r)["last_error"] and "unset" in status(r)["last_error"]
        assert sink.received == []
        r.env["CHAT_HOOK"] = secret
        controller = r.popen("controller", "run", "-q")
        try:
            until(lambda: sink.ok_count >= 1)
            until(lambda: status(r)["lag"] == 0)
        finally:
            controller.send_signal(signal.SIGTERM)
            controller.wait(30)
    assert status(r)["last_error"] is None
    exported = r.sh("log", "export").stdout
    assert "env:CHAT_HOOK" in exported and "t0p-s3cret" not in exported
    assert b"t0p-s3cret" not in (r.home / "events.db").read_bytes()
    assert "t0p-s3cret" not in everything_printed(r)


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--url", "http://127.0.0.1:9/x", "--url-env", "X"], "one of them"),
        ([], "one of them"),
        (["--url-env", "NOT-A-NAME"], "not an environment variable name"),
    ],
)
def test_url_and_url_env_are_one_or_the_other(rollouts: Rollouts, args: list[str], why: str) -> None:
    refused = rollouts.sh("notify", "add", "ops", *args)
    assert refused.exit_code == 2 and why in refused.stderr
    assert rollouts.event_count() == 0
