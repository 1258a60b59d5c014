"""`rollouts audit` on histories that break the gates (G1: a claim inside a freeze, G2: a claim without its
approval), written through the application layer and the domain's event methods, as a forger would."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rollouts.adapters.home import Home
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import open_app
from rollouts.domain import rollout
from rollouts.domain.config import DeploymentConfig
from rollouts.domain.deployment import Deployment
from rollouts.domain.freeze import FreezeAll
from rollouts.domain.spec import Spec

ALICE = new_meta("alice@test")
BOB = new_meta("bob@test")
LONG_AGO = "2001-01-01T00:00:00+00:00"
LATER = (datetime.now(UTC) + timedelta(days=1)).isoformat()


def history(home: Path, case: str) -> None:
    """A config `web` (requiring approval for the approval cases) whose version 1 is claimed after `case`."""
    app = open_app(Home(home), None)
    needs = case.startswith("approval")
    config = DeploymentConfig(name="web", spec=Spec(command=["true"], require_approval=needs).to_data(), meta=ALICE)
    first: Deployment = rollout.trigger(config, [], cause="manual", message=None, supersede=False, meta=ALICE)[-1]
    saved: list[Any] = [config, first]
    if case == "frozen":
        config._frozen(until=None, reason="release week", meta=BOB)
    elif case == "frozen until later":
        config._frozen(until=LATER, reason="release week", meta=BOB)
    elif case == "freeze expired":
        config._frozen(until=LONG_AGO, reason="long ago", meta=BOB)
    elif case == "unfrozen":
        config._frozen(until=None, reason="release week", meta=BOB)
        config._unfrozen(meta=BOB)
    elif case.startswith("all frozen"):
        every = FreezeAll(meta=BOB)
        every._frozen(until=None, reason="incident", meta=BOB)
        if case == "all frozen, then lifted":
            every._unfrozen(meta=BOB)
        saved.append(every)
    elif case == "approval by bob":
        first.approve(BOB)
    elif case == "approval by the asker":
        first._approved(attempt=1, meta=ALICE)  # the domain refuses this: a forger writes it
    app.save(*saved)
    if needs:
        first._claimed(attempt=1, name="web-1-deploy-1", step=first.first_step().as_data(), claimant="c", meta=ALICE)
        config.claim_slot(1, 1, "c", ALICE)
    else:
        rollout.claim(config, first, "c", ALICE)  # with no clock: the freeze is not checked
    app.save(config, first)
    app.close()


def violations(rollouts: Any, *args: str) -> tuple[int, list[tuple[str, str]]]:
    result = rollouts.run("audit", *args, "-o", "json")
    return result.exit_code, [(v["rule"], v["message"]) for v in json.loads(result.stdout)["violations"]]


@pytest.mark.parametrize(
    ("case", "rule", "words"),
    [
        ("frozen", "G1", "inside a freeze (config) until unfreeze"),
        ("frozen until later", "G1", f"inside a freeze (config) until {LATER}"),
        ("all frozen", "G1", "inside a freeze (all) until unfreeze"),
        ("approval missing", "G2", "claimed without an approval (attempt asked for by alice@test)"),
        ("approval by the asker", "G2", "approved by alice@test, who asked for it"),
    ],
    ids=["frozen", "frozen until later", "all frozen", "approval missing", "approval by the asker"],  # no time in an id
)
def test_a_claim_a_gate_should_have_held_is_a_violation(rollouts: Any, case: str, rule: str, words: str) -> None:
    history(rollouts.home, case)
    code, found = violations(rollouts)
    assert code == 1
    assert [r for r, _ in found] == [rule] and words in found[0][1]
    assert violations(rollouts, "web") == (code, found)  # the freeze of all counts for each config


@pytest.mark.parametrize("case", ["freeze expired", "unfrozen", "all frozen, then lifted", "approval by bob"])
def test_a_claim_after_the_gate_opened_is_clean(rollouts: Any, case: str) -> None:
    history(rollouts.home, case)
    assert violations(rollouts) == (0, [])


def test_the_audit_names_the_gate_rules_in_its_table_output(rollouts: Any) -> None:
    history(rollouts.home, "frozen")
    result = rollouts.sh("audit")
    assert result.exit_code == 1
    assert "VIOLATION G1 at position" in result.stdout and "(web v1)" in result.stdout


@pytest.mark.parametrize("approved", [False, True], ids=["lowered alone", "lowered with bob's approval"])
def test_a_claim_under_a_guard_lowered_without_a_second_person_is_g2(rollouts: Any, approved: bool) -> None:
    """7.11: alice drops --require-approval; a spec written so without `config approve` (an older tool, a
    forger) leaves every deployment opened under it reported when claimed."""
    app = open_app(Home(rollouts.home), None)
    config = DeploymentConfig(name="web", spec=Spec(command=["true"], require_approval=True).to_data(), meta=ALICE)
    lowered = Spec(command=["true"]).to_data()
    if approved:
        assert config.change_spec(lowered, ALICE) and config.spec != lowered  # pending, not applied
        config.approve_guard(BOB)
    else:
        config._spec_changed(spec=lowered, meta=ALICE)  # the domain asks for an approval: a forger writes it
    assert config.spec == lowered
    first: Deployment = rollout.trigger(config, [], cause="manual", message=None, supersede=True, meta=ALICE)[-1]
    rollout.claim(config, first, "c", ALICE)
    app.save(config, first)
    app.close()
    code, found = violations(rollouts)
    if approved:
        assert (code, found) == (0, [])
    else:
        assert code == 1 and [r for r, _ in found] == ["G2"] and "approval guard lowered at position" in found[0][1]
