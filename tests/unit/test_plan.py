"""plan(): each guard on its own, from rows and runtime observations, with no I/O (DESIGN 5, 9)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rollouts.adapters.controller.plan import UNKNOWN_TO_RUNTIME, Action, Kind, batches, plan
from rollouts.adapters.runtime.port import Observed
from rollouts.projections.desired import COLUMNS

ME = "claimant-me"
OTHER = "claimant-other"
CLAIMED_AT = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SOON = CLAIMED_AT + timedelta(seconds=5)
DEPLOYER = "app-1-deploy-1"


def row(phase: str = "Pending", **changes: Any) -> dict[str, Any]:
    """A desired-deployers row (projections/desired.py COLUMNS); Pending rows are ours and claimed."""
    revision = changes.get("revision", 1)
    base: dict[str, Any] = {
        "stream": f"stream-{changes.get('config', 'app')}-{revision}",
        "config": "app",
        "revision": revision,
        "attempt": 1,
        "phase": phase,
        "step": None,
        "step_kind": None,
        "created": 0,
        "started": 0,
        "cancel": 0,
        "claimant": None,
        "claimed_at": None,
        "timeout": 600,
        "notification_id": 7,
        "approval": 0,
        "step_at": None,
        "step_delay": 0,
        "held": 0.0,
        "verify_timeout": 30,
    }
    if phase != "New":
        base.update(step=DEPLOYER, step_kind="deployer", claimant=ME, claimed_at=CLAIMED_AT.isoformat())
    base.update(changes)
    assert set(base) == set(COLUMNS)
    return base


def seen(
    state: str, exit_code: int | None = None, reason: str | None = None, name: str = DEPLOYER, dying: bool = False
) -> Observed:
    """What the runtime reports about one deployer; ended rows have ended_at unless still `dying`."""
    ended = None if state in ("created", "running") or dying else CLAIMED_AT.isoformat()
    return Observed(name, "app", 1, 1, state, exit_code, reason, CLAIMED_AT.isoformat(), ended, False)


@pytest.mark.parametrize("state", ["stopped", "deleted"])
def test_a_stopped_or_deleted_deployer_still_dying_is_not_counted_as_ended(state: str) -> None:
    """Chaos found it: a stop commits 'stopped' before its grace ends; the slot must wait for ended_at."""
    assert "record_lost" not in kinds(plan([row(created=1)], {DEPLOYER: seen(state, dying=True)}, ME, SOON))
    assert kinds(plan([row(cancel=1)], {DEPLOYER: seen(state, dying=True)}, ME, SOON)) == ["stop"]


def kinds(actions: list[Action]) -> list[str]:
    return [a.kind for a in actions]


# -- claims ----------------------------------------------------------------------


def test_a_new_deployment_is_claimed_when_nothing_else_of_its_config_is_active() -> None:
    actions = plan([row("New")], {}, ME, SOON)
    assert actions == [Action(Kind.CLAIM, "app", 1, 1)]


@pytest.mark.parametrize("listed_first", [True, False], ids=["active-first", "new-first"])
@pytest.mark.parametrize("active", ["Pending", "Running"])
def test_a_new_deployment_is_not_claimed_while_another_of_its_config_is_active(active: str, listed_first: bool) -> None:
    older, newer = row(active, claimant=OTHER), row("New", revision=2)
    rows = [older, newer] if listed_first else [newer, older]
    assert plan(rows, {}, ME, SOON) == []


def test_an_active_deployment_of_another_config_does_not_hold_back_a_claim() -> None:
    busy = row("Running", config="other", step="other-1-deploy-1", claimant=OTHER)
    actions = plan([busy, row("New")], {}, ME, SOON)
    assert actions == [Action(Kind.CLAIM, "app", 1, 1)]


def test_only_one_new_deployment_per_config_is_claimed_in_a_pass() -> None:
    rows = [row("New"), row("New", revision=2), row("New", config="web"), row("New", config="web", revision=2)]
    actions = plan(rows, {}, ME, SOON)
    assert [(a.kind, a.config, a.revision) for a in actions] == [("claim", "app", 1), ("claim", "web", 1)]


def test_a_cancelled_new_deployment_is_not_claimed() -> None:
    assert plan([row("New", cancel=1)], {}, ME, SOON) == []


def test_a_cancelled_new_deployment_does_not_hold_back_the_next_one() -> None:
    actions = plan([row("New", cancel=1), row("New", revision=2)], {}, ME, SOON)
    assert [(a.kind, a.revision) for a in actions] == [("claim", 2)]


# -- ownership -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "observed"),
    [
        ({}, {}),
        ({}, {DEPLOYER: seen("exited", 0)}),
        ({"created": 1}, {DEPLOYER: seen("deleted")}),
        ({"cancel": 1}, {DEPLOYER: seen("running")}),
        ({"claimed_at": (CLAIMED_AT - timedelta(days=1)).isoformat()}, {DEPLOYER: seen("running")}),
    ],
    ids=["no-row", "exited", "deleted", "cancel", "expired"],
)
def test_a_deployment_claimed_by_another_claimant_is_left_alone(changes: dict[str, Any], observed: dict) -> None:
    theirs = row("Running", claimant=OTHER, **changes)
    assert plan([theirs], observed, ME, SOON) == []


def test_a_deployment_whose_claimant_lease_expired_is_recorded_lost_not_created_or_stopped() -> None:
    theirs = row("Running", claimant=OTHER, created=1, started=1)
    actions = plan([theirs], {}, ME, SOON, frozenset({OTHER}))
    assert actions == [Action(Kind.RECORD_LOST, "app", 1, 1, name=DEPLOYER, reason=f"claimant {OTHER} lease expired")]


def test_our_own_deployment_is_never_recorded_lost_for_an_expired_lease() -> None:
    actions = plan([row("Running", created=1, started=1)], {DEPLOYER: seen("running")}, ME, SOON, frozenset({ME}))
    assert actions == []


def test_an_expired_lease_of_an_unrelated_claimant_leaves_another_claimants_deployment_alone() -> None:
    theirs = row("Running", claimant=OTHER, created=1, started=1)
    assert plan([theirs], {}, ME, SOON, frozenset({"claimant-third"})) == []


# -- creates and reports ---------------------------------------------------------


def test_a_claimed_step_with_no_runtime_row_and_not_marked_created_is_created() -> None:
    actions = plan([row()], {}, ME, SOON)
    assert actions == [Action(Kind.CREATE, "app", 1, 1, name=DEPLOYER)]


@pytest.mark.parametrize("phase", ["Pending", "Running"])
def test_a_step_marked_created_with_no_runtime_row_is_lost_and_never_created_again(phase: str) -> None:
    """Its row was committed before the create was recorded: a runtime without it (runtime.db deleted)
    knows nothing of its processes, so the attempt ends Lost now, not at its timeout."""
    started = 1 if phase == "Running" else 0
    actions = plan([row(phase, created=1, started=started)], {}, ME, SOON)
    assert actions == [Action(Kind.RECORD_LOST, "app", 1, 1, name=DEPLOYER, reason=UNKNOWN_TO_RUNTIME)]
    assert "runtime.db" in UNKNOWN_TO_RUNTIME


@pytest.mark.parametrize("kind", ["pre", "post"])
def test_a_hook_step_is_created_under_its_own_name(kind: str) -> None:
    hook = f"app-1-hook-{kind}-1-2"
    actions = plan([row(step=hook, step_kind=kind)], {}, ME, SOON)
    assert actions == [Action(Kind.CREATE, "app", 1, 1, name=hook)]


def test_a_runtime_row_for_a_step_not_marked_created_is_recorded_created_not_created() -> None:
    actions = plan([row()], {DEPLOYER: seen("created")}, ME, SOON)
    assert actions == [Action(Kind.RECORD_CREATED, "app", 1, 1, name=DEPLOYER)]


@pytest.mark.parametrize("state", ["running", "exited"])
def test_a_running_or_exited_deployer_not_marked_started_is_recorded_started(state: str) -> None:
    actions = plan([row(created=1)], {DEPLOYER: seen(state, 0 if state == "exited" else None)}, ME, SOON)
    assert kinds(actions)[0] == "record_started"
    assert "create" not in kinds(actions)


def test_a_deployer_only_created_is_not_recorded_started() -> None:
    assert plan([row(created=1)], {DEPLOYER: seen("created")}, ME, SOON) == []


def test_a_deployer_marked_started_is_not_recorded_started_again() -> None:
    assert plan([row("Running", created=1, started=1)], {DEPLOYER: seen("running")}, ME, SOON) == []


def test_an_exited_deployer_is_recorded_with_its_exit_code_and_reason() -> None:
    observed = {DEPLOYER: seen("exited", 3, "exit code 3")}
    actions = plan([row("Running", created=1, started=1)], observed, ME, SOON)
    assert actions == [Action(Kind.RECORD_EXIT, "app", 1, 1, name=DEPLOYER, exit_code=3, reason="exit code 3")]


def test_a_deployer_seen_first_after_it_exited_is_recorded_created_started_and_exited_in_one_pass() -> None:
    actions = plan([row()], {DEPLOYER: seen("exited", 0)}, ME, SOON)
    assert kinds(actions) == ["record_created", "record_started", "record_exit"]
    assert actions[-1].exit_code == 0


@pytest.mark.parametrize("state", ["deleted", "lost", "stopped"])
def test_a_deleted_lost_or_stopped_deployer_is_recorded_lost_and_never_created(state: str) -> None:
    actions = plan([row("Running", created=1, started=1)], {DEPLOYER: seen(state)}, ME, SOON)
    assert actions == [Action(Kind.RECORD_LOST, "app", 1, 1, name=DEPLOYER, reason=f"deployer {state}")]


@pytest.mark.parametrize("state", ["deleted", "lost", "stopped"])
def test_an_ended_row_for_a_step_not_marked_created_is_recorded_lost_not_created(state: str) -> None:
    actions = plan([row()], {DEPLOYER: seen(state, reason="shim vanished")}, ME, SOON)
    assert "create" not in kinds(actions)
    assert actions[-1] == Action(Kind.RECORD_LOST, "app", 1, 1, name=DEPLOYER, reason="shim vanished")


# -- cancel ----------------------------------------------------------------------


@pytest.mark.parametrize("state", ["created", "running"])
def test_a_cancel_request_stops_a_deployer_that_still_runs(state: str) -> None:
    actions = plan([row("Running", created=1, cancel=1)], {DEPLOYER: seen(state)}, ME, SOON)
    assert actions == [Action(Kind.STOP, "app", 1, 1, name=DEPLOYER, reason="cancelled")]


def test_a_cancel_request_with_no_runtime_row_stops_the_name_so_the_executor_tombstones_it() -> None:
    actions = plan([row(cancel=1)], {}, ME, SOON)
    assert actions == [Action(Kind.STOP, "app", 1, 1, name=DEPLOYER, reason="cancelled")]


@pytest.mark.parametrize("state", ["exited", "stopped", "deleted", "lost"])
def test_a_cancel_request_with_an_ended_deployer_is_confirmed(state: str) -> None:
    actions = plan([row("Running", created=1, cancel=1)], {DEPLOYER: seen(state, 143)}, ME, SOON)
    assert actions == [Action(Kind.CANCEL, "app", 1, 1, name=DEPLOYER)]


def test_a_cancel_request_between_steps_is_confirmed() -> None:
    assert plan([row(step=None, step_kind=None, cancel=1)], {}, ME, SOON) == [Action(Kind.CANCEL, "app", 1, 1)]


# -- timeout ---------------------------------------------------------------------


def test_an_attempt_past_its_timeout_from_the_claim_is_timed_out() -> None:
    late = CLAIMED_AT + timedelta(seconds=600, milliseconds=1)
    actions = plan([row("Running", created=1, started=1)], {DEPLOYER: seen("running")}, ME, late)
    assert actions == [Action(Kind.TIMEOUT, "app", 1, 1, name=DEPLOYER, reason="timeout: attempt exceeded 600s")]


def test_an_attempt_at_its_timeout_is_not_timed_out_yet() -> None:
    on_time = CLAIMED_AT + timedelta(seconds=600)
    actions = plan([row("Running", created=1, started=1)], {DEPLOYER: seen("running")}, ME, on_time)
    assert actions == []


def test_a_hook_past_the_timeout_is_timed_out_too() -> None:
    hook = "app-1-hook-pre-1"
    late = CLAIMED_AT + timedelta(seconds=601)
    actions = plan([row(step=hook, step_kind="pre", created=1)], {hook: seen("running", name=hook)}, ME, late)
    assert kinds(actions) == ["timeout"]
    assert actions[0].name == hook


# -- nothing to do ---------------------------------------------------------------


def test_nothing_is_planned_for_a_pending_row_with_no_step() -> None:
    assert plan([row(step=None, step_kind=None)], {}, ME, SOON) == []


def test_nothing_is_planned_for_an_empty_view() -> None:
    assert plan([], {}, ME, SOON) == []


# -- batches ---------------------------------------------------------------------


def test_reports_about_one_deployer_seen_in_one_pass_are_one_batch() -> None:
    actions = plan([row()], {DEPLOYER: seen("exited", 0)}, ME, SOON)
    [batch] = batches(actions)
    assert [a.kind for a in batch] == ["record_created", "record_started", "record_exit"]


def test_reports_about_different_deployers_and_other_actions_are_batches_of_their_own() -> None:
    web = "web-1-deploy-1"
    rows = [row(), row(config="web", step=web), row("New", config="new")]
    observed = {DEPLOYER: seen("running"), web: seen("exited", 0, name=web)}
    grouped = batches(plan(rows, observed, ME, SOON))
    assert [[(a.kind, a.config) for a in b] for b in grouped] == [
        [("record_created", "app"), ("record_started", "app")],
        [("record_created", "web"), ("record_started", "web"), ("record_exit", "web")],
        [("claim", "new")],
    ]


def test_batches_keep_every_action_in_order() -> None:
    actions = [
        Action(Kind.STOP, "app", 1, 1, name=DEPLOYER),
        Action(Kind.RECORD_LOST, "app", 1, 1, name=DEPLOYER),
        Action(Kind.RECORD_LOST, "app", 1, 2, name="app-1-deploy-2"),
        Action(Kind.CREATE, "app", 2, 1, name="app-2-deploy-1"),
    ]
    grouped = batches(actions)
    assert [a for b in grouped for a in b] == actions
    assert [len(b) for b in grouped] == [1, 1, 1, 1]


def test_a_new_deployment_holds_back_the_next_new_one_of_its_config() -> None:
    actions = plan([row("New"), row("New", revision=2)], {}, ME, SOON)
    assert [(a.kind, a.revision) for a in actions] == [("claim", 1)]


# -- steps, measurements and pauses (7.6): each guard alone ------------------------------------------

MEASUREMENT = "app-1-verify-1-2"
PAUSE = "app-1-pause-1-1"
AT = CLAIMED_AT + timedelta(seconds=10)


def test_a_measurement_is_created_only_once_its_interval_after_the_one_before_has_passed() -> None:
    waiting = row("Running", step=MEASUREMENT, step_kind="verify", step_at=AT.isoformat(), step_delay=5)
    assert plan([waiting], {}, ME, AT + timedelta(seconds=4)) == []
    assert plan([waiting], {}, ME, AT + timedelta(seconds=5)) == [Action(Kind.CREATE, "app", 1, 1, name=MEASUREMENT)]


def test_a_timed_pause_ends_when_its_seconds_have_passed_and_a_manual_one_never_by_the_controller() -> None:
    timed = row("Running", step=PAUSE, step_kind="pause", created=1, step_at=AT.isoformat(), step_delay=30)
    assert plan([timed], {}, ME, AT + timedelta(seconds=29)) == []
    assert plan([timed], {}, ME, AT + timedelta(seconds=30)) == [Action(Kind.END_PAUSE, "app", 1, 1, name=PAUSE)]
    manual = {**timed, "step_delay": None}
    assert plan([manual], {}, ME, AT + timedelta(days=9)) == []  # no timeout either while a human is awaited


def test_time_paused_for_a_human_does_not_count_toward_the_timeout() -> None:
    held = row("Running", step=DEPLOYER, created=1, started=1, held=3600.0, timeout=600)
    late = CLAIMED_AT + timedelta(seconds=3000)
    assert plan([held], {DEPLOYER: seen("running")}, ME, late) == []
    assert plan([{**held, "held": 0.0}], {DEPLOYER: seen("running")}, ME, late)[0].kind == Kind.TIMEOUT


def test_a_measurement_past_its_timeout_is_stopped() -> None:
    running = row("Running", step=MEASUREMENT, step_kind="verify", created=1, started=1, step_at=AT.isoformat())
    assert plan([running], {MEASUREMENT: seen("running")}, ME, AT + timedelta(seconds=30)) == []
    [stop] = plan([running], {MEASUREMENT: seen("running")}, ME, AT + timedelta(seconds=31))
    assert (stop.kind, stop.name, stop.reason) == (
        Kind.STOP_MEASUREMENT,
        MEASUREMENT,
        "timeout: measurement exceeded 30s",
    )


def test_an_expired_claim_with_nothing_running_is_taken_over_not_lost() -> None:
    paused = row("Running", claimant=OTHER, step=PAUSE, step_kind="pause", created=1, step_delay=None)
    between = row("Running", claimant=OTHER, step=MEASUREMENT, step_kind="verify", revision=2, config="b")
    expired = frozenset({OTHER})
    assert [(a.kind, a.name) for a in plan([paused, between], {}, ME, SOON, expired)] == [
        (Kind.TAKE_OVER, PAUSE),
        (Kind.TAKE_OVER, MEASUREMENT),
    ]
    measuring = {**between, "created": 1}
    assert [a.kind for a in plan([measuring], {}, ME, SOON, expired)] == [Kind.RECORD_LOST]
    assert plan([paused], {}, ME, SOON) == []  # a live claimant's pause is its own


def test_a_queued_revision_is_not_claimed_behind_an_open_one() -> None:
    """7.10: a New revision behind an older open one (--queue) waits, even when the older one is New too
    (waiting for an approval); once alone, it is claimed."""
    gated_head = row("New", revision=1, approval=1)
    queued = row("New", revision=2)
    assert plan([gated_head, queued], {}, ME, SOON) == []
    assert plan([queued], {}, ME, SOON) == [Action(Kind.CLAIM, "app", 2, 1)]
