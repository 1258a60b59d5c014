"""A save that lost a race on the log (both stores): refused whole, the chain intact, the store usable at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import IntegrityError

from rollouts.adapters.home import Home
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import open_app
from rollouts.adapters.store.verify import verify_log
from rollouts.domain import rollout
from rollouts.domain.spec import Spec


def meta() -> dict[str, Any]:
    return new_meta("tester@test")


def test_a_save_that_lost_a_race_appends_nothing_and_the_next_save_is_chained(
    tmp_path: Path, backend_store: str | None
) -> None:
    home = Home(tmp_path / "h")
    app, rival = open_app(home, backend_store), open_app(home, backend_store)
    try:
        app.create_config("web", Spec(command=["true"]), meta())
        config = app.config("web")  # read: version n
        aggregates = rollout.trigger(config, [], cause="manual", message=None, supersede=False, meta=meta())
        rival.latest("web", None, False, meta())  # committed first: the config is at n + 1 now
        head = app.recorder.max_notification_id()
        with pytest.raises(IntegrityError):
            app.save(*aggregates)
        assert app.recorder.max_notification_id() == head  # nothing of the loser's events
        assert app.latest("web", None, True, meta()) == 2  # decided again on fresh state, saved at once
        verdict = verify_log(app.recorder)  # chained from the last hash before the lost save, to the new head
        assert verdict.ok and verdict.head == app.recorder.max_notification_id() > head
    finally:
        app.close()
        rival.close()


def test_a_save_whose_commit_answer_was_lost_is_saved_once_and_told_so(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection lost after the COMMIT reached the server (a network blip, a restart at that moment):
    the library's retry inserted again and met the rows it had committed: `rollout latest` said "revision 2
    in progress" (exit 1) having made it, `--supersede` made two, `freeze` froze twice. The retry now
    finds its events saved, and the command goes on as saved."""
    from eventsourcing.persistence import OperationalError

    from rollouts.adapters.store.postgres.recorder import ChainedPostgresRecorder

    app = open_app(Home(tmp_path / "h"), postgres_url)
    try:
        app.create_config("web", Spec(command=["true"]), meta())
        real, lost = ChainedPostgresRecorder._send, []

        def answer_lost(self: Any, conn: Any, stored_events: Any, guards: Any, head: Any = None) -> list[int]:
            ids = real(self, conn, stored_events, guards, head)  # committed by the server
            if not lost:
                lost.append(ids)
                raise OperationalError("server closed the connection unexpectedly")
            return ids

        monkeypatch.setattr(ChainedPostgresRecorder, "_send", answer_lost)
        head = app.recorder.max_notification_id()
        assert app.latest("web", None, False, meta()) == 1
        assert lost, "the commit's answer was not lost: nothing was tried"
        assert app.recorder.max_notification_id() == max(lost[0]) > head  # its events, once
        assert app.latest("web", None, True, meta()) == 2  # and the app goes on from there
        assert verify_log(app.recorder).ok
    finally:
        app.close()


def test_a_save_whose_commit_was_still_under_way_when_the_retry_looked_is_saved_once(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The retry looked for its events while the server still worked on the first COMMIT (a slow fsync, a
    synchronous standby): it saw none, inserted again, waited for the lock and met its own rows; the
    command was then refused ("revision 1 in progress") though revision 1 was its own."""
    import threading
    import time

    from eventsourcing.persistence import OperationalError

    from rollouts.adapters.store.postgres.recorder import ChainedPostgresRecorder

    app = open_app(Home(tmp_path / "h"), postgres_url)
    try:
        app.create_config("web", Spec(command=["true"]), meta())
        real, first = ChainedPostgresRecorder._send, []

        def slow_commit(self: Any, conn: Any, stored_events: Any, guards: Any, head: Any = None) -> list[int]:
            if first:
                return real(self, conn, stored_events, guards, head)
            first.append(None)
            begun = threading.Event()

            def server() -> None:  # the first attempt's transaction, committed 0.8 s after its answer was lost
                with self.datastore.get_connection() as other:
                    with other.pipeline() as pipeline:
                        other.execute("BEGIN")
                        self._append(other, stored_events, guards, pipeline.sync)
                    begun.set()
                    time.sleep(0.8)
                    other.execute("COMMIT")

            threading.Thread(target=server, daemon=True).start()
            begun.wait(10)
            raise OperationalError("server closed the connection unexpectedly")

        monkeypatch.setattr(ChainedPostgresRecorder, "_send", slow_commit)
        head = app.recorder.max_notification_id()
        assert app.latest("web", None, False, meta()) == 1
        triggered = [n for n in app.recorder.select_notifications(head + 1, 100) if "RolloutTriggered" in n.topic]
        assert len(triggered) == 1
        assert verify_log(app.recorder).ok
    finally:
        app.close()


def test_a_save_whose_commit_answer_was_lost_while_the_server_stayed_away_is_told_unknown(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The COMMIT reached the server, its answer was lost, and every retry's look failed too: the save was
    reported as a store that cannot be used, as if nothing were saved, though it was. It is now told as a
    write whose outcome is unknown (exit 5 all the same: stop, and look)."""
    from eventsourcing.persistence import OperationalError

    from rollouts.adapters.store.postgres.recorder import ChainedPostgresRecorder, OutcomeUnknown

    app = open_app(Home(tmp_path / "h"), postgres_url)
    try:
        app.create_config("web", Spec(command=["true"]), meta())
        real, saved = ChainedPostgresRecorder._send, []

        def answer_lost(self: Any, conn: Any, stored_events: Any, guards: Any, head: Any = None) -> list[int]:
            saved.append(real(self, conn, stored_events, guards, head))  # committed by the server
            raise OperationalError("server closed the connection unexpectedly")

        def server_away(self: Any, stored_events: Any) -> None:
            raise OperationalError("connection refused")

        monkeypatch.setattr(ChainedPostgresRecorder, "_send", answer_lost)
        monkeypatch.setattr(ChainedPostgresRecorder, "_committed", server_away)
        head = app.recorder.max_notification_id()
        with pytest.raises(OutcomeUnknown, match="outcome is unknown.*may or may not be saved"):
            app.latest("web", None, False, meta())
        assert len(saved) == 1 and app.recorder.max_notification_id() == max(saved[0]) > head  # it was saved
    finally:
        app.close()


def test_a_save_that_never_reached_the_server_is_not_told_unknown(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eventsourcing.persistence import OperationalError

    from rollouts.adapters.store.postgres.recorder import OutcomeUnknown

    app = open_app(Home(tmp_path / "h"), postgres_url)
    try:
        app.create_config("web", Spec(command=["true"]), meta())

        def no_connection(*args: Any, **kwargs: Any) -> Any:
            raise OperationalError("connection refused")

        monkeypatch.setattr(app.recorder.datastore, "get_connection", no_connection)
        with pytest.raises(OperationalError) as raised:
            app.latest("web", None, False, meta())
        assert not isinstance(raised.value, OutcomeUnknown)
    finally:
        monkeypatch.undo()
        app.close()
