"""`serve` off loopback (DESIGN 7.8): refused without a token or --insecure; a bearer token on every
request; /api/events pages at 1,000 with a Link header; the home's binding checked on every request."""

from __future__ import annotations

import http.client
import json
import select
import signal
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from rollouts.adapters.cli.state import State
from rollouts.adapters.web import exposition, routes
from tests.conftest import Rollouts

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)
TOKEN = "s3cret-token-for-the-test-0123456789"


@contextmanager
def serving(rollouts: Rollouts, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """A real `serve` process on a free port; yields host:port to connect to (over loopback)."""
    saved = rollouts.env
    rollouts.env = {**saved, **(env or {})}
    try:
        proc = rollouts.popen("serve", "--port", "0", *args)
    finally:
        rollouts.env = saved
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "serve printed no URL within 30 s"
        port = urlsplit(proc.stdout.readline().strip()).port  # type: ignore[union-attr]
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert "Traceback" not in err, err


def get(address: str, path: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection(address, timeout=30)
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def history(rollouts: Rollouts) -> None:
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    for _ in range(3):
        assert rollouts.run("rollout", "latest", "web", "--supersede").exit_code == 0


def test_off_loopback_without_a_token_or_insecure_it_does_not_start(rollouts: Rollouts) -> None:
    history(rollouts)
    refused = rollouts.sh("serve", "--host", "0.0.0.0", "--port", "0", timeout=30)
    assert refused.exit_code == 2 and "--token-env" in refused.stderr and "--insecure" in refused.stderr
    unset = rollouts.sh("serve", "--host", "0.0.0.0", "--port", "0", "--token-env", "NO_SUCH_VAR_HERE", timeout=30)
    assert unset.exit_code == 2 and "NO_SUCH_VAR_HERE is unset or empty" in unset.stderr


def test_with_a_token_every_request_needs_it(rollouts: Rollouts) -> None:
    history(rollouts)
    with serving(rollouts, "--host", "0.0.0.0", "--token-env", "SERVE_TOKEN", env={"SERVE_TOKEN": TOKEN}) as at:
        for path in ("/", "/metrics", "/api/events"):
            assert get(at, path).status == 401
            assert get(at, path, {"Authorization": "Bearer wrong"}).status == 401
            assert get(at, path, {"Authorization": f"Basic {TOKEN}"}).status == 401
            assert get(at, path, {"Authorization": f"Bearer {TOKEN}"}).status == 200
        assert get(at, "/metrics").getheader("WWW-Authenticate", "").startswith("Bearer")


def test_insecure_serves_off_loopback_with_a_warning(rollouts: Rollouts) -> None:
    history(rollouts)
    with serving(rollouts, "--host", "0.0.0.0", "--insecure") as at:
        assert get(at, "/api/configs").status == 200


def test_api_events_pages_with_a_link_to_the_next_page(rollouts: Rollouts) -> None:
    history(rollouts)
    with serving(rollouts) as at:
        conn = http.client.HTTPConnection(at, timeout=30)
        seen, path = [], "/api/events?limit=2"
        while path:
            conn.request("GET", path)
            response = conn.getresponse()
            seen += [e["position"] for e in json.loads(response.read())]
            link = response.getheader("Link")
            path = link[1 : link.index(">")] if link else ""
        conn.close()
    whole = json.loads(rollouts.run("events", "-o", "json").stdout)
    assert seen == [e["position"] for e in whole] and len(seen) > 2


def test_api_events_without_a_limit_stops_at_the_page_size(rollouts: Rollouts, monkeypatch: pytest.MonkeyPatch) -> None:
    history(rollouts)
    monkeypatch.setattr(routes, "API_EVENTS", 3)  # 1,000 in production: the same code path at a size a test makes
    state = State(str(rollouts.home), None, "tester@test")
    try:
        state.reading()
        answer = routes.answer(state, exposition.Exposition(lambda: state.projections), "/api/events?type=Registered")
        assert len(json.loads(answer.body)) == 1 and not answer.headers  # fewer than a page: no next link
        answer = routes.answer(state, exposition.Exposition(lambda: state.projections), "/api/events")
        assert [e["position"] for e in json.loads(answer.body)] == [1, 2, 3]
        assert dict(answer.headers)["Link"] == '</api/events?after=3>; rel="next"'
    finally:
        state.close()


def test_a_log_put_back_while_serving_is_refused_on_the_next_request(rollouts: Rollouts) -> None:
    history(rollouts)
    with serving(rollouts) as at:
        assert get(at, "/api/configs").status == 200
        with sqlite3.connect(rollouts.home / "events.db") as conn:  # an older copy put back in place
            head = conn.execute("SELECT max(rowid) FROM stored_events").fetchone()[0]
            conn.execute("DELETE FROM stored_events WHERE rowid >= ?", (head - 1,))
            conn.execute("DELETE FROM rollouts_chain WHERE position >= ?", (head - 1,))
        refused = get(at, "/api/configs")
        assert refused.status == 503
        assert get(at, "/").status == 503


def test_serve_opens_every_view_before_it_listens_not_at_the_first_scrape(rollouts: Rollouts) -> None:
    history(rollouts)
    proc = rollouts.popen("serve", "--port", "0")
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "serve printed no URL within 30 s"
        proc.stdout.readline()  # type: ignore[union-attr]
        files = [fd.resolve() for fd in Path(f"/proc/{proc.pid}/fd").iterdir()]
        opened = {f.name.split("-")[0] for f in files if f.suffix == ".db" and f.parent.name == "projections"}
        assert {"desired", "history", "audit"} <= opened  # before any request
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
