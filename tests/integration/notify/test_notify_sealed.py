"""A sink's worker on a log sealed under it (a move, DESIGN 7.3): the change in flight is sent once, never again
from that log (the log it moves to sends its changes again, under its own key), and sending stops."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from rollouts.adapters.home import Home
from rollouts.adapters.notify.lease import SinkLeases
from rollouts.adapters.notify.worker import Worker
from rollouts.adapters.service.bootstrap import open_app
from rollouts.domain.notification import KINDS
from tests.conftest import Result, Rollouts

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the checkout, where `bench` is
from bench.shared.sink_server import SinkServer  # noqa: E402

pytestmark = pytest.mark.slow  # a real HTTP sink whose answers wait (see tests/test_tiers.py)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.stderr
    return result


def wait_for(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_a_worker_whose_log_is_sealed_during_a_send_never_sends_it_again_and_stops(rollouts: Rollouts) -> None:
    r = rollouts
    with SinkServer(delay_s=0.8) as sink:  # each answer waits: the seal lands while the first send is in flight
        ok(r.run("notify", "add", "hook", "--url", sink.url, "--on", ",".join(KINDS)))
        ok(r.run("config", "create", "web", "--", "true"))
        ok(r.run("rollout", "latest", "web"))  # triggered
        ok(r.run("rollout", "cancel", "web"))  # failed: nothing left open, so the log may be sealed
        app = open_app(Home(r.home), None)
        stopping, said = threading.Event(), []
        worker = Worker(app, "hook", SinkLeases(app.recorder, "test", 30), lambda: {}, stopping, said.append)
        try:
            worker.start()
            assert wait_for(lambda: len(sink.received) == 1, 10), "the worker sent nothing"
            ok(r.run("log", "export", "--seal", "--reason", "moving"))
            worker.join(10)
            assert not worker.is_alive(), f"the worker goes on sending on a sealed log: {said}"
            time.sleep(1.0)  # a resend would have arrived by now
            assert len(sink.received) == 1, [(g.key, g.body["kind"]) for g in sink.received]
            assert stopping.is_set() and any("is sealed" in line for line in said), said
        finally:
            stopping.set()
            worker.join(5)
            app.close()


def test_a_worker_on_a_sealed_log_sends_nothing(rollouts: Rollouts) -> None:
    r = rollouts
    with SinkServer() as sink:
        ok(r.run("notify", "add", "hook", "--url", sink.url, "--on", ",".join(KINDS)))
        ok(r.run("config", "create", "web", "--", "true"))
        ok(r.run("rollout", "latest", "web"))
        ok(r.run("rollout", "cancel", "web"))
        ok(r.run("log", "export", "--seal"))  # two changes wait for the sink, on a log that moved
        app = open_app(Home(r.home), None)
        stopping, said = threading.Event(), []
        worker = Worker(app, "hook", SinkLeases(app.recorder, "test", 30), lambda: {}, stopping, said.append)
        try:
            worker.start()
            worker.join(10)
            assert not worker.is_alive() and sink.received == [], said
        finally:
            stopping.set()
            worker.join(5)
            app.close()
