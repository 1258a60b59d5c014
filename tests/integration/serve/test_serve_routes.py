"""`rollouts serve`'s answers, asked in-process: the API is the CLI's `-o json`, unknown paths are 404,
bad parameters 400, the page escapes what the log says, and /metrics parses as Prometheus text."""

from __future__ import annotations

import contextlib
import html
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rollouts.adapters.cli.state import State
from rollouts.adapters.web import exposition, routes
from tests.conftest import Result, Rollouts


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.stderr
    return result


class Server:
    """Asks the routes what `rollouts serve` would answer, from its own State on the home."""

    def __init__(self, rollouts: Rollouts) -> None:
        self.state = State(str(rollouts.home), None, "tester@test")
        self.state.reading()
        self.registry = exposition.Exposition(lambda: self.state.projections)

    def get(self, target: str) -> routes.Response:
        return routes.answer(self.state, self.registry, target)

    def json(self, target: str, status: int = 200) -> Any:
        response = self.get(target)
        assert (response.status, response.content_type) == (status, routes.JSON), response.body[:300]
        return json.loads(response.body)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Rollouts:
    """One home for the module, which its tests only read: web with version 1 New (its reason is
    markup), bad with version 1 cancelled before any controller ran (Failed) and version 2 New."""
    folder = tmp_path_factory.mktemp("serve")
    (folder / "work").mkdir()
    rollouts = Rollouts(folder / "home", folder / "work")
    ok(rollouts.run("config", "create", "web", "--pre-hook", "true", "--", "true"))
    ok(rollouts.run("config", "create", "bad", "--", "false"))
    ok(rollouts.run("rollout", "latest", "web", "--reason", '<img src=x onerror="alert(1)">'))
    ok(rollouts.run("rollout", "latest", "bad"))
    ok(rollouts.run("rollout", "cancel", "bad"))
    ok(rollouts.run("rollout", "latest", "bad"))
    return rollouts


@pytest.fixture(scope="module")
def server(home: Rollouts) -> Iterator[Server]:
    served = Server(home)
    yield served
    served.state.close()


@pytest.mark.parametrize(
    ("target", "command"),
    [
        ("/api/configs", ["config", "list"]),
        ("/api/configs/bad/history", ["rollout", "history", "bad"]),
        ("/api/configs/web/history?revision=1", ["rollout", "history", "web", "--revision", "1"]),
        ("/api/events", ["events"]),
        ("/api/events?config=bad&type=CancelRequested", ["events", "bad", "--type", "CancelRequested"]),
        ("/api/events?after=3&limit=4", ["events", "--after", "3", "--limit", "4"]),
        (
            "/api/events?config=web&version=1&actor=tester@test",
            ["events", "web", "--revision", "1", "--actor", "tester@test"],
        ),
    ],
)
def test_the_api_answers_byte_for_byte_what_the_cli_prints_with_o_json(
    home: Rollouts, server: Server, target: str, command: list[str]
) -> None:
    response = server.get(target)
    assert response.status == 200
    assert response.body.decode() == ok(home.run(*command, "-o", "json")).stdout
    assert json.loads(response.body)  # not an empty answer that would trivially match


@pytest.mark.parametrize(
    "target",
    [
        "/nothing",
        "/configs/",
        "/configs/web/",
        "/configs/../events.db",
        "/configs/..%2Fevents.db",
        "/configs/%2e%2e",
        "/api/configs/../../etc/passwd/history",
        "/api/configs/Web/history",
        "/api/configs/missing/history",
        "/configs/missing",
        "//etc/passwd",
        "/events.db",
        "/projections/history.db",
        "/api",
        "/api/configs/web",
    ],
)
def test_paths_that_name_no_page_are_404(server: Server, target: str) -> None:
    response = server.get(target)
    assert response.status == 404, target
    assert b"SQLite" not in response.body and b"Traceback" not in response.body


def test_a_missing_config_is_404_with_the_clis_message(server: Server, home: Rollouts) -> None:
    cli = home.run("rollout", "history", "missing", "-o", "json")
    assert cli.exit_code == 4
    assert server.json("/api/configs/missing/history", 404) == {"error": "config 'missing' not found"}
    assert cli.stderr.strip() == "error: config 'missing' not found"


@pytest.mark.parametrize(
    "target",
    [
        "/api/events?after=-1",
        "/api/events?after=99999",
        "/api/events?limit=0",
        "/api/events?after=5&until=3",
        "/api/events?version=1",
        "/api/events?since=yesterday",
        "/api/events?config=web&config=bad",
        "/api/events?nope=1",
        "/api/events?type=NoSuchEvent",
        "/api/configs?x=1",
        "/api/configs/web/history?revision=x",
        "/api/events?config=Bad_Name",  # as `events Bad_Name` exits 2 (was 404)
        "/api/events?nope",  # named, though empty (was taken)
        "/api/configs?x=",
    ],
)
def test_bad_parameters_are_400_with_a_message(server: Server, target: str) -> None:
    assert server.json(target, 400)["error"]


def test_a_bad_time_says_what_the_cli_says(server: Server, home: Rollouts) -> None:
    """The API's message is the CLI's, byte for byte (it was made by the CLI's option callback, and moving the
    web stack off click must not change it)."""
    cli = home.run("events", "--since", "yesterday")
    assert cli.exit_code == 2 and "'yesterday' is not an ISO time like 2026-01-31T12:00:00" in cli.stderr
    expected = "since: Invalid value: 'yesterday' is not an ISO time like 2026-01-31T12:00:00"
    assert server.json("/api/events?since=yesterday", 400) == {"error": expected}


def test_the_index_links_each_config_with_its_latest_phase(server: Server) -> None:
    page = server.get("/").body.decode()
    assert '<a class="config" href="/configs/web">web</a>' in page
    assert '<a class="config" href="/configs/bad">bad</a></td><td class="num">2</td>' in page
    assert page.count('class="phase phase-New">New<') == 2


def test_the_config_page_escapes_what_the_log_says(server: Server) -> None:
    page = server.get("/configs/web?actor=%3Cscript%3E").body.decode()
    history = server.get("/configs/web").body.decode()
    assert "<img src=x" not in history and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in history
    assert "<script>" not in page and 'value="&lt;script&gt;"' in page


def test_a_deployment_never_claimed_has_no_bar(server: Server) -> None:
    page = server.get("/configs/bad").body.decode()
    assert "No attempt has been claimed yet." in page and "<rect" not in page


def test_events_on_the_page_are_paged_with_a_next_link(server: Server) -> None:
    page = server.get("/configs/web?limit=2").body.decode()
    assert page.count("<tr><td>") == 2 + 1  # two events, and the history's one deployment
    assert 'class="next" href="/configs/web?limit=2&amp;after=' in page


def test_metrics_parse_and_count_deployments_by_phase_and_outcome(server: Server) -> None:
    response = server.get("/metrics")
    assert response.status == 200 and response.content_type.startswith("text/plain; version=")
    families = {f.name: f for f in text_string_to_metric_families(response.body.decode())}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    assert samples[("rollouts_deployments", (("config", "bad"), ("phase", "Failed")))] == 1
    assert samples[("rollouts_deployments", (("config", "bad"), ("phase", "New")))] == 1
    assert samples[("rollouts_deployments", (("config", "web"), ("phase", "New")))] == 1
    assert samples[("rollouts_deployments_finished_total", (("config", "bad"), ("outcome", "failed")))] == 1
    assert samples[("rollouts_deployments_finished_total", (("config", "bad"), ("outcome", "complete")))] == 0
    assert not any(labels == (("config", "web"), ("outcome", "complete")) for _, labels in samples)  # never ended
    assert families["rollouts_rollout_duration_seconds"].type == "histogram"
    assert samples[("rollouts_rollout_duration_seconds_count", ())] == 1
    assert samples[("rollouts_rollout_duration_seconds_bucket", (("le", "+Inf"),))] == 1
    assert samples[("rollouts_log_head_position", ())] == len(server.json("/api/events"))
    assert {labels for name, labels in samples if name == "rollouts_projection_lag_events"} == {
        (("projection", p),) for p in ("desired", "history", "audit")
    }


def test_metrics_show_a_view_behind_the_log_and_the_scrape_catches_history_up(rollouts: Rollouts) -> None:
    ok(rollouts.run("config", "create", "web", "--", "true"))
    server = Server(rollouts)
    server.get("/metrics")
    ok(rollouts.run("rollout", "latest", "web"))  # events the server's views have not read yet
    text = server.get("/metrics").body.decode()
    lag = {
        s.labels["projection"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "rollouts_projection_lag_events"
    }
    assert lag["history"] > 0
    assert 'rollouts_deployments{config="web",phase="New"} 1.0' in text
    server.state.close()


def test_a_bug_in_one_request_is_a_500_with_one_line_and_the_server_goes_on(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    from rollouts.adapters.web.server import Reader

    def broken(state: Any, metrics: Any, target: str) -> routes.Response:
        if target == "/api/boom":
            raise RuntimeError("boom")
        return routes.answer(state, metrics, target)

    reader = Reader(server.state, broken, lambda error: f"internal error ({error})")
    failed = reader.respond("/api/boom")
    assert (failed.status, json.loads(failed.body)) == (500, {"error": "internal error (boom)"})
    assert capsys.readouterr().err == "error: internal error (boom)\n"
    assert reader.respond("/api/configs").status == 200


def test_a_signal_that_lands_while_a_connection_is_accepted_still_stops_serving(server: Server) -> None:
    """SIGTERM (or Ctrl-C) while the server's loop handles a socket: the loop catches any other exception
    there and serves on, so a stop raised as one would be lost and serve would run on."""
    import os
    import signal
    import sys
    import threading
    import time

    from rollouts.adapters.web.server import Reader, listen, serve_until_stopped, url

    reader = Reader(server.state, routes.answer, lambda error: f"internal error ({error})")
    httpd = listen("127.0.0.1", 0, reader)
    accepting = httpd.handle_accept

    def handle_accept() -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # handled at the next bytecode: inside the accept
        accepting()

    httpd.handle_accept = handle_accept
    caught: list[object] = []
    httpd.handle_error = lambda: caught.append(sys.exc_info()[1])  # the loop caught it: logged, not stopped
    asking = threading.Thread(target=lambda: _ask(url(httpd) + "api/configs"), daemon=True)
    asking.start()
    watchdog = threading.Timer(10, httpd.close)  # a lost stop: serving goes on, and this ends it
    watchdog.start()
    started = time.monotonic()
    try:
        serve_until_stopped(httpd, reader)
    finally:
        watchdog.cancel()
    assert time.monotonic() - started < 10, "the stop was lost: serve went on until the watchdog shut it down"
    reader.lock.release()
    assert caught == []


def _ask(address: str) -> None:
    import urllib.request

    with contextlib.suppress(OSError):  # the server stopped before answering: what the test wants
        urllib.request.urlopen(address, timeout=5).read()


def test_a_pages_poll_brings_what_was_appended_while_it_was_drawn(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page names the position its poll asks for news after. Read once the views were caught up, that
    position could be past events another process appended meanwhile: the page did not show them and its
    poll never brought them (the browser test's page kept showing no running deployer, once in CI)."""
    folder = tmp_path_factory.mktemp("serve-race")
    (folder / "work").mkdir()
    rollouts = Rollouts(folder / "home", folder / "work")
    ok(rollouts.run("config", "create", "live", "--", "true"))
    ok(rollouts.run("rollout", "latest", "live"))
    served = Server(rollouts)
    try:
        store = served.state.projections
        caught_up = store.catch_up_named

        def then_another_process_appends(names: Any) -> None:
            caught_up(names)
            monkeypatch.setattr(store, "catch_up_named", caught_up)  # once
            ok(rollouts.run("rollout", "cancel", "live"))

        monkeypatch.setattr(store, "catch_up_named", then_another_process_appends)
        page = served.get("/configs/live").body.decode()
        assert "Failed" not in page  # drawn before the cancel
        poll = html.unescape(re.search(r'<main data-poll="([^"]+)"', page).group(1))  # type: ignore[union-attr]
        news = served.json(poll.replace("limit=1", "limit=10"))
        assert "CancelRequested" in [event["type"] for event in news], poll
    finally:
        served.state.close()
