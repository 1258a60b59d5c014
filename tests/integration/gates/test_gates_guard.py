"""A claim decided before a freeze of all was committed is not saved after it: the claim's save is guarded
by the version of the freeze it read (both stores)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from rollouts.adapters.home import Home
from rollouts.adapters.service import commands
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import open_app
from rollouts.adapters.store.log_recorder import ReadGuardBroken
from rollouts.domain.spec import Spec


def test_a_freeze_of_all_committed_between_a_claims_decision_and_its_save_stops_it(
    tmp_path: Path, backend_store: str | None
) -> None:
    home = Home(tmp_path / "home")
    app, other = open_app(home, backend_store), open_app(home, backend_store)
    try:
        app.create_config("web", Spec(command=["true"]), new_meta("alice"))
        app.latest("web", None, False, new_meta("alice"))
        decision = commands.claim_decision(app, "web", 1, "ctl", new_meta("ctl"))
        app.forget_reads()
        aggregates, _ = decision()  # read: no freeze of all
        other.freeze(None, None, "incident", datetime.now(UTC), new_meta("bob"))
        head = app.recorder.max_notification_id()
        with pytest.raises(ReadGuardBroken):
            app.save(*aggregates)
        assert app.recorder.max_notification_id() == head  # nothing of the claim was appended
        assert app.decide(decision) is None  # decided again on fresh state: refused, frozen
        other.unfreeze(None, datetime.now(UTC), new_meta("bob"))
        assert app.decide(decision) == "web-1-deploy-1"
    finally:
        app.close()
        other.close()
