"""The http provider against a real local HTTP server (DESIGN 7.9): the measurement process as the controller
starts it; what a `*-env` option names is read then and never shown, nor is a failed reply's text or URL."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.analysis_servers import Site, measure, serving_site


@pytest.fixture
def site() -> Iterator[Site]:
    """A real HTTP server on loopback (tests/support/analysis_servers.py)."""
    yield from serving_site()


def test_a_json_path_hit_is_the_result_and_a_miss_is_empty(site: Site) -> None:
    hit = measure({"provider": "http", "url": f"{site.address}/json", "json_path": "$.a.b[0]", "success": "result < 1"})
    assert (hit.code, hit.line, hit.document["value"]) == (0, "passed: value 0.5", 0.5)
    both = measure(
        {"provider": "http", "url": f"{site.address}/json", "json_path": "$.a.b[*]", "success": "all(result > 0)"}
    )
    assert (both.code, both.line) == (0, "passed: value [0.5, 2]")
    miss = {"provider": "http", "url": f"{site.address}/json", "json_path": "$.a.c", "success": "result < 1"}
    missed = measure(miss)
    assert (missed.code, missed.line) == (2, "inconclusive: value none: empty result")
    assert measure({**miss, "json_path": "$.none"}).document["error"] == "empty result"  # null is no value
    assert measure({**miss, "on_empty": "passed"}).line == "passed: value none"


def test_without_a_path_the_whole_reply_is_the_result_and_any_2xx_passes(site: Site) -> None:
    whole = measure({"provider": "http", "url": f"{site.address}/json"})
    assert whole.code == 0 and json.loads(str(whole.document["value"]))["status"] == "ok"
    text = measure({"provider": "http", "url": f"{site.address}/text", "success": 'result == "all good"'})
    assert (text.code, text.line) == (0, 'passed: value "all good"')


def test_post_with_a_body_headers_and_a_header_from_the_environment(site: Site) -> None:
    template = {
        "provider": "http",
        "url": f"{site.address}/echo",
        "method": "POST",
        "headers": {"X-Team": "web"},
        "header_env": {"Authorization": "HOOK_TOKEN"},
        "body": '{"ask": 1}',
        "json_path": "$.method",
        "success": 'result == "POST"',
    }
    done = measure(template, env={"HOOK_TOKEN": "Bearer tok-9f8e7d"})
    assert (done.code, done.line) == (0, 'passed: value "POST"')
    seen = site.seen[-1]
    assert (seen.method, seen.body, seen.headers["X-Team"], seen.headers["Authorization"]) == (
        "POST",
        '{"ask": 1}',
        "web",
        "Bearer tok-9f8e7d",
    )
    assert "tok-9f8e7d" not in done.stdout + done.stderr
    unset = measure(template)
    assert (unset.code, unset.document["error"]) == (2, "$HOOK_TOKEN is not set")
    assert len(site.seen) == 1  # nothing was sent without it
    get = measure({"provider": "http", "url": f"{site.address}/echo", "json_path": "$.method"})
    assert get.line == 'passed: value "GET"'


def test_a_user_and_password_in_the_url_are_sent_as_basic_auth_and_never_shown(site: Site) -> None:
    url = site.address.replace("http://", "http://bob:pa%40ss-w0rd@") + "/echo"
    done = measure({"provider": "http", "url_env": "HOOK_URL", "json_path": "$.method"}, env={"HOOK_URL": url})
    sent = {name.lower(): value for name, value in site.seen[-1].headers.items()}
    assert (done.code, sent["authorization"]) == (0, "Basic Ym9iOnBhQHNzLXcwcmQ=")  # bob:pa@ss-w0rd
    assert "w0rd" not in done.stdout + done.stderr and "Ym9i" not in done.stdout


def test_a_non_2xx_reply_names_its_status_alone(site: Site) -> None:
    """Neither the reply's text nor any part of the URL (a token in it) appears in the outcome."""
    url = f"{site.address}/fail?token=tok-a1b2c3"
    for template, named in (
        ({"provider": "http", "url": url}, "the URL"),
        ({"provider": "http", "url_env": "HOOK_URL", "json_path": "$.x"}, "the URL in $HOOK_URL"),
    ):
        done = measure(template, env={"HOOK_URL": url})
        assert (done.code, done.document) == (
            2,
            {"outcome": "inconclusive", "value": None, "error": f"{named} answered HTTP 503 Service Unavailable"},
        )
        shown = done.stdout + done.stderr
        for secret in ("tok-a1b2c3", "hunter2", "secret-body-text", "/fail", "127.0.0.1", str(site.address)):
            assert secret not in shown


def test_a_reply_slower_than_the_timeout_is_inconclusive(site: Site) -> None:
    slow = measure({"provider": "http", "url": f"{site.address}/slow?token=tok-x", "timeout": 1})
    assert (slow.code, slow.line) == (2, "inconclusive: value none: no answer from the URL within the timeout of 1 s")
    assert slow.seconds < 4 and "tok-x" not in slow.stdout


def test_a_bad_json_path_or_a_reply_that_is_not_json_is_inconclusive(site: Site) -> None:
    bad = measure({"provider": "http", "url": f"{site.address}/json", "json_path": "$.["})
    assert bad.code == 2 and str(bad.document["error"]).startswith("'$.[' is not a JSON path")
    text = measure({"provider": "http", "url": f"{site.address}/text", "json_path": "$.a"})
    assert text.document["error"] == "the URL answered HTTP 200 OK with a reply that is not JSON"


def test_the_measurement_process_loads_neither_click_nor_pydantic(site: Site) -> None:
    """Its start-up is its cost (the speed goal of DESIGN 7.9): `-X importtime` lists every module it loads."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "ROLLOUT_ANALYSIS": json.dumps({"provider": "http", "url": f"{site.address}/json"})}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "rollouts", "measure", "--resolved"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stdout
    loaded = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "rollouts.adapters.analysis.process" in loaded
    assert not {name for name in loaded if name.split(".")[0] in ("click", "pydantic", "jsonpath_ng", "eventsourcing")}
