"""Notifications without a controller: kinds, documents, sinks' rules, the change reader, the retry delays."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollouts.adapters.notify.worker import retry_delay
from rollouts.adapters.service.sinks import BadURL, check_url, shown
from rollouts.domain import phases
from rollouts.domain.errors import DomainError
from rollouts.domain.notification import DEFAULT_ON, UnknownKind, kind_of, parse_kinds, reason_of
from rollouts.domain.sink import Sink


def test_kinds_parse_in_a_fixed_order_and_unknown_ones_are_usage_errors() -> None:
    assert parse_kinds("failed, triggered,failed") == ("triggered", "failed")
    assert DEFAULT_ON == ("complete", "failed")
    for bad in ("complete,done", "", " , "):
        with pytest.raises(UnknownKind):
            parse_kinds(bad)


@pytest.mark.parametrize(
    ("before", "event", "after", "kind"),
    [
        (None, "Created", phases.NEW, "triggered"),
        (phases.FAILED, "RetryRequested", phases.NEW, "triggered"),
        (phases.PENDING, "DeployerStarted", phases.RUNNING, "running"),
        (phases.RUNNING, "DeployerSucceeded", phases.RUNNING, None),  # on to the post hook
        (phases.RUNNING, "HookSucceeded", phases.COMPLETE, "complete"),
        (phases.NEW, "CancelRequested", phases.FAILED, "failed"),
        (phases.RUNNING, "CancelRequested", phases.RUNNING, None),
        (phases.PENDING, "DeployerClaimed", phases.PENDING, None),
    ],
)
def test_a_change_is_a_new_attempt_or_a_move_into_running_complete_or_failed(
    before: str | None, event: str, after: str, kind: str | None
) -> None:
    assert kind_of(before, event, after) == kind


def test_urls_must_be_http_or_https_with_a_host() -> None:
    assert check_url("https://example.com:8443/x?y=1") == "https://example.com:8443/x?y=1"
    for bad in ("ftp://example.com/", "http://", "example.com", "http://exa mple.com/", "http://h:99999/", "file:///x"):
        with pytest.raises(BadURL):
            check_url(bad)


def test_a_sink_records_a_failure_once_per_error_text_and_a_delivery_clears_it() -> None:
    sink = Sink(name="ops", url="http://h/", on=["failed"], config="web", start=7, meta={})
    assert sink.fail(9, "HTTP 500", {}) and not sink.fail(9, "HTTP 500", {})
    assert sink.fail(9, "no answer within 10 s", {})
    sink.deliver(9, {})
    assert (sink.delivered, sink.last_error) == (9, None)
    with pytest.raises(DomainError):
        sink.deliver(9, {})  # never backwards, never twice
    assert sink.wants("failed", "web") and not sink.wants("complete", "web") and not sink.wants("failed", "api")
    assert [type(e).__name__ for e in sink.collect_events()] == [
        "SinkAdded",
        "NotificationFailed",
        "NotificationFailed",
        "NotificationDelivered",
    ]


def test_retries_start_within_a_second_and_are_never_more_than_ten_seconds_apart() -> None:
    delays = [retry_delay(n) for n in range(1, 30)]
    assert delays[0] <= 1.0 and max(delays) == 10.0 and delays == sorted(delays)


def test_the_reader_finds_each_change_with_its_document(tmp_path: Path) -> None:
    from rollouts.adapters.home import Home
    from rollouts.adapters.notify.changes import ChangeReader
    from rollouts.adapters.service.bootstrap import open_app
    from rollouts.domain.spec import Spec

    app = open_app(Home(tmp_path / "home"), None)
    try:
        meta = {"actor": "alice"}
        app.create_config("web", Spec.model_validate({"command": ["true"]}), meta)
        app.latest("web", None, False, meta)
        app.cancel("web", {"actor": "bob"})
        head = app.recorder.max_notification_id()
        changes = list(ChangeReader(app.recorder).changes(0, head))
        assert [(c.kind, c.config, c.revision, c.attempt, c.phase, c.reason, c.actor) for c in changes] == [
            ("triggered", "web", 1, 1, "New", None, "alice"),
            ("failed", "web", 1, 1, "Failed", "cancelled", "bob"),
        ]
        # Read from the cancel on, with nothing remembered: the phase before is folded from the stream.
        again = list(ChangeReader(app.recorder).changes(changes[1].position - 1, head))
        assert again == changes[1:]
        assert set(changes[0].document()) == {
            "position", "kind", "config", "version", "attempt", "phase", "reason", "actor", "timestamp",
            "promoted_from",
        }  # fmt: skip
        assert changes[0].document()["promoted_from"] is None
        assert changes[0].key("LOG", "ops") == f"LOG:{changes[0].position}:ops"
    finally:
        app.close()


def test_a_promotion_tells_what_it_was_promoted_from(tmp_path: Path) -> None:
    """7.10: a stage's deployment notifies `promoted_from` in each of its changes, also read from mid-stream."""
    from rollouts.adapters.home import Home
    from rollouts.adapters.notify.changes import ChangeReader
    from rollouts.adapters.service.bootstrap import open_app
    from rollouts.domain import rollout
    from rollouts.domain.spec import Spec

    app = open_app(Home(tmp_path / "home"), None)
    try:
        meta = {"actor": "alice"}
        app.create_config("prod", Spec.model_validate({"command": ["true"]}), meta)
        config = app.config("prod")
        app.save(
            *rollout.trigger(
                config, [], cause="promotion of staging revision 3", message=None, supersede=False, meta=meta
            )
        )
        app.cancel("prod", meta)
        head = app.recorder.max_notification_id()
        changes = list(ChangeReader(app.recorder).changes(0, head))
        assert [c.document()["promoted_from"] for c in changes] == [{"config": "staging", "revision": 3}] * 2
        again = list(ChangeReader(app.recorder).changes(changes[1].position - 1, head))
        assert again == changes[1:]
    finally:
        app.close()


def test_a_failed_post_is_told_in_short_stable_words() -> None:
    import socket

    from rollouts.adapters.notify.http import Poster

    with socket.socket() as closed:  # bound, never listening: the connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        poster = Poster(timeout=1)
        assert poster.post(f"http://127.0.0.1:{port}/", {}, "k") == "cannot connect: Connection refused"
        assert poster.post(f"http://127.0.0.1:{port}/", {}, "k") == "cannot connect: Connection refused"


def test_a_notifier_never_started_stops_quietly() -> None:
    """A controller that stands aside for its twin stops a notifier it never started (was: exit 70)."""
    from rollouts.adapters.notify.notifier import Notifier

    notifier = Notifier(open_app=lambda: None, meta=dict, log=lambda _: None, holder="test")
    notifier.stop(wait=0.1)
    assert not notifier.busy()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://hooks.example.com/x", "https://hooks.example.com/x"),
        ("https://bot:hunter2@h.example.com:8443/x?y=1", "https://bot:***@h.example.com:8443/x?y=1"),
        ("https://:p%40ss@h/x", "https://:***@h/x"),
        ("http://bot:pw@[::1/x", "http://***@[::1/x"),  # does not parse: a hand-made log's
    ],
)
def test_a_sink_url_is_shown_without_its_password(url: str, expected: str) -> None:
    assert shown(url) == expected


def test_a_pause_and_an_automatic_rollback_are_kinds_of_their_own() -> None:
    rollback = {"cause": "automatic rollback to 3", "message": "version 4 failed: verification failed"}
    assert kind_of(None, "Created", phases.NEW, rollback) == "rollback"
    assert kind_of(None, "Created", phases.NEW, {"cause": "manual"}) == "triggered"
    assert kind_of(phases.RUNNING, "StepPaused", phases.RUNNING, {"why": "step"}) == "paused"
    assert reason_of("StepPaused", {"why": "inconclusive"}, phases.RUNNING) == "paused: inconclusive"
    assert reason_of("Created", rollback, phases.NEW) == "version 4 failed: verification failed"
    assert parse_kinds("rollback,paused") == ("paused", "rollback")
