"""I11 in `audit` (domain/stage_audit.py): each rule on its own, over a hand-made log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from rollouts.domain.audit_rules import RuleEvent, audit_rules
from rollouts.domain.stage import AUTOMATIC

T0 = datetime(2026, 1, 1, tzinfo=UTC)
STAGE = {"command": ["d"], "env": {}, "upstream": "up", "artifact": ["IMAGE"], "soak": 60, "promote": "auto"}


class Log:
    def __init__(self) -> None:
        self.events: list[RuleEvent] = []

    def add(self, type_: str, config: str, revision: int | None, at: datetime, **data: Any) -> None:
        self.events.append((len(self.events) + 1, type_, config, revision, at.isoformat(), data, revision is not None))

    def upstream(self, revision: int, image: str, done: datetime, ok: bool = True) -> None:
        spec = {"command": ["d"], "env": {"IMAGE": image}}
        self.add("Created", "up", revision, T0, spec=spec, cause="manual")
        self.add("DeployerClaimed", "up", revision, T0, step={"kind": "deployer", "name": f"up-{revision}-deploy-1"})
        self.add("DeployerStarted", "up", revision, T0, name=f"up-{revision}-deploy-1")
        if ok:
            self.add("DeployerSucceeded", "up", revision, done, name=f"up-{revision}-deploy-1", next=None)
        else:
            self.add("DeployerFailed", "up", revision, done, name=f"up-{revision}-deploy-1", reason="boom")

    def promotion(self, revision: int, of: int, image: str, at: datetime, automatic: bool = True, **spec: Any) -> None:
        made = {**STAGE, **spec, "env": {"IMAGE": image}}
        message = AUTOMATIC if automatic else None
        cause = f"promotion of {spec.get('upstream', 'up')} revision {of}"
        self.add("Created", "prod", revision, at, spec=made, cause=cause, message=message)

    def rules(self) -> list[str]:
        """The I11 violations; the same when the audit folds only the upstreams the specs name (as `audit` does)."""
        named = frozenset(e[5]["spec"]["upstream"] for e in self.events if e[5].get("spec", {}).get("upstream"))
        found = [f"{v.rule} {v.message}" for v in audit_rules(self.events) if v.rule == "I11"]
        assert [f"{v.rule} {v.message}" for v in audit_rules(self.events, named) if v.rule == "I11"] == found
        return found


def log() -> Log:
    found = Log()
    found.add("Registered", "prod", None, T0, name="prod", spec=STAGE)
    found.upstream(1, "app:1", T0)
    return found


def test_a_right_promotion_passes() -> None:
    found = log()
    found.promotion(1, 1, "app:1", T0 + timedelta(seconds=61))
    assert found.rules() == []


def test_another_artifact() -> None:
    found = log()
    found.promotion(1, 1, "app:2", T0 + timedelta(seconds=61))
    assert found.rules() == ["I11 carries another artifact than revision 1 of up"]


def test_not_soaked() -> None:
    found = log()
    found.promotion(1, 1, "app:1", T0 + timedelta(seconds=30))
    assert found.rules() == ["I11 promoted while not eligible: revision 1 of up is soaking for 30 more seconds"]


def test_failed_upstream() -> None:
    found = log()
    found.upstream(2, "app:2", T0, ok=False)
    found.promotion(1, 2, "app:2", T0 + timedelta(days=1))
    assert found.rules() == ["I11 promoted while not eligible: revision 2 of up failed: boom"]


def test_an_upstream_the_stage_does_not_take_from() -> None:
    found = log()
    found.promotion(1, 1, "app:1", T0 + timedelta(seconds=61), upstream="other")
    assert found.rules() == ["I11 promoted from other, which its stage does not take from"]


def test_an_upstream_revision_the_log_does_not_hold() -> None:
    found = log()
    found.promotion(1, 7, "app:1", T0 + timedelta(seconds=61))
    assert found.rules() == ["I11 promoted from revision 7 of up, which the log does not hold"]


def test_automatic_twice() -> None:
    found = log()
    found.promotion(1, 1, "app:1", T0 + timedelta(seconds=61))
    found.promotion(2, 1, "app:1", T0 + timedelta(seconds=62))
    assert found.rules() == ["I11 promoted revision 1 of up again (after 1)"]
    by_hand = log()  # a human may roll the same revision out again
    by_hand.promotion(1, 1, "app:1", T0 + timedelta(seconds=61))
    by_hand.promotion(2, 1, "app:1", T0 + timedelta(seconds=62), automatic=False)
    assert by_hand.rules() == []


def test_automatic_not_the_newest() -> None:
    found = log()
    found.upstream(2, "app:2", T0)
    found.promotion(1, 1, "app:1", T0 + timedelta(seconds=120))
    assert found.rules() == ["I11 promoted revision 1 of up, not the newest eligible (2)"]
