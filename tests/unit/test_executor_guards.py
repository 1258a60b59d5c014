"""The executor's create guard and the claim, each checked on its own against a real event log."""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import IntegrityError

from rollouts.adapters.controller.executor import HANDLERS, REPORTERS, Executor
from rollouts.adapters.controller.plan import REPORTS, Action, Kind
from rollouts.adapters.home import Home
from rollouts.adapters.runtime.port import DeployerExists, NoSuchDeployer, Observed
from rollouts.adapters.service import commands
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import open_app
from rollouts.domain import ids
from rollouts.domain.spec import Hook, Spec
from rollouts.domain.step import Step

ME = "claimant-me"
OTHER = "claimant-other"
DEPLOYER = "app-1-deploy-1"


class FakeRuntime:
    """The runtime port with no rows: records create() calls; `exists` makes it answer as for a name used before."""

    def __init__(self, exists: bool = False) -> None:
        self.exists = exists
        self.created: list[dict[str, Any]] = []

    @property
    def folder(self) -> Path:
        return Path("/nonexistent/runtime")

    @property
    def database(self) -> Path:
        return self.folder / "runtime.db"

    def create(
        self,
        name: str,
        *,
        config: str,
        revision: int,
        attempt: int,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        pass_env: Sequence[str] = (),
        claim: str | None = None,
    ) -> None:
        details = {"config": config, "revision": revision, "attempt": attempt, "argv": argv, "env": env}
        self._record({"name": name, **details, "cwd": cwd, "pass_env": pass_env, "claim": claim})
        if self.exists:
            raise DeployerExists(name)

    def _record(self, call: dict[str, Any]) -> None:
        self.created.append(call)

    def batched(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def tombstone(self, name: str, *, config: str, revision: int, attempt: int, reason: str) -> bool:
        return True

    def get(self, name: str) -> Observed | None:
        return None

    def born(self) -> str | None:
        return None

    def list(self, *, include_pruned: bool = False, configs: Collection[str] | None = None) -> list[Observed]:
        return []

    def active(self) -> list[Observed]:
        return []

    def observe(self) -> list[Observed]:
        return []

    def stop(self, name: str, *, reason: str, grace: float = 5.0) -> None:
        pass

    def delete(self, name: str) -> None:
        raise NoSuchDeployer(name)

    def prune(self, names: list[str]) -> None:
        pass

    def log_path(self, name: str) -> Path:
        return self.folder / "logs" / f"{name}.log"

    def beat(self, at: float | None = None) -> None:
        pass

    def data_version(self) -> int:
        return 0

    def start_fork_server(self) -> bool:
        return False

    def close(self) -> None:
        pass


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Any]:
    application = open_app(Home(tmp_path / "h"), None)
    yield application
    application.close()


def meta() -> dict[str, Any]:
    return new_meta("tester@test")


def triggered(app: Any, spec: Spec | None = None) -> None:
    """Config `app` with version 1 New."""
    app.create_config("app", spec or Spec(command=["true"]), meta())
    app.latest("app", None, False, meta())


def claimed(app: Any, claimant: str = ME, spec: Spec | None = None) -> None:
    triggered(app, spec)
    assert commands.claim(app, "app", 1, claimant, meta()) is not None


def head(app: Any) -> int:
    return app.recorder.max_notification_id() or 0


def types_after(app: Any, position: int) -> list[str]:
    """Event type names appended after `position`."""
    notifications = app.recorder.select_notifications(position + 1, 100)
    return [n.topic.rsplit(".", 1)[-1] for n in notifications]


def create(app: Any, runtime: FakeRuntime, name: str = DEPLOYER, attempt: int = 1, tmp: str = "/") -> None:
    executor = Executor(app, runtime, ME, "tester@test", tmp)
    executor.run(Action(Kind.CREATE, "app", 1, attempt, name=name))


def step_of(app: Any) -> Step | None:
    return app.deployment(app.config("app"), 1).step


# -- every kind of action has its handler ----------------------------------------------


def test_every_action_kind_has_exactly_one_handler_and_the_reports_are_the_plans() -> None:
    """A kind added to plan.Kind with no handler fails here, not in a controller's pass."""
    run, reported = set(HANDLERS), set(REPORTERS)
    assert run | reported == set(Kind), f"no handler for {set(Kind) - run - reported}"
    assert not run & reported, f"two handlers for {run & reported}"
    assert reported == REPORTS  # reports are batched by the plan and applied as changes, never run alone


# -- the create guard ---------------------------------------------------------------


def test_create_runs_the_current_step_of_a_committed_claim_and_appends_nothing(app: Any, tmp_path: Path) -> None:
    """DeployerCreated comes from a later pass's report, from the runtime's row (batched with others)."""
    claimed(app, spec=Spec(command=["deploy.sh", "--now"], env={"K": "v"}))
    runtime = FakeRuntime()
    before = head(app)
    create(app, runtime, tmp=str(tmp_path))
    [call] = runtime.created
    assert (call["name"], call["argv"], call["attempt"], call["cwd"]) == (
        DEPLOYER,
        ["deploy.sh", "--now"],
        1,
        str(tmp_path),
    )
    assert call["env"]["K"] == "v"
    assert call["env"]["ROLLOUT_DEPLOYER"] == DEPLOYER
    assert head(app) == before


def test_create_is_skipped_for_the_name_of_an_attempt_the_log_has_retried(app: Any) -> None:
    claimed(app)
    commands.report(app, "app", 1, lambda d: d.report_lost(DEPLOYER, "gone", meta()), meta())
    app.retry("app", meta())
    assert commands.claim(app, "app", 1, ME, meta()) == "app-1-deploy-2"
    runtime = FakeRuntime()
    before = head(app)
    create(app, runtime, DEPLOYER, attempt=1)
    assert runtime.created == []
    assert head(app) == before


def test_create_is_skipped_for_a_step_the_log_has_moved_past(app: Any) -> None:
    claimed(app, spec=Spec(command=["true"], pre_hook=Hook(command=["true"])))
    hook = "app-1-hook-pre-1"
    commands.report(app, "app", 1, lambda d: d.report_exited(hook, 0, None, meta()), meta())
    assert step_of(app).name == DEPLOYER  # type: ignore[union-attr]
    runtime = FakeRuntime()
    before = head(app)
    create(app, runtime, hook)
    assert runtime.created == []
    assert head(app) == before


def test_create_is_skipped_for_a_deployment_not_claimed_yet(app: Any) -> None:
    triggered(app)
    runtime = FakeRuntime()
    before = head(app)
    create(app, runtime)
    assert runtime.created == []
    assert head(app) == before


def test_create_is_skipped_when_another_claimant_holds_the_claim(app: Any) -> None:
    claimed(app, claimant=OTHER)
    runtime = FakeRuntime()
    before = head(app)
    create(app, runtime)
    assert runtime.created == []
    assert head(app) == before


def test_create_is_skipped_once_cancel_was_requested(app: Any) -> None:
    claimed(app)
    app.cancel("app", meta())
    assert app.deployment(app.config("app"), 1).phase == "Pending"
    runtime = FakeRuntime()
    before = head(app)
    create(app, runtime)
    assert runtime.created == []
    assert head(app) == before


def test_create_is_skipped_when_the_log_says_the_step_is_already_created(app: Any) -> None:
    claimed(app)
    commands.report(app, "app", 1, lambda d: d.report_created(DEPLOYER, f"local:{DEPLOYER}", meta()), meta())
    runtime = FakeRuntime()
    before = head(app)
    create(app, runtime)
    assert runtime.created == []
    assert head(app) == before


def test_a_second_create_before_the_report_is_refused_by_the_runtime_and_appends_nothing(app: Any) -> None:
    """Until a later pass reports DeployerCreated, the runtime's insert-if-absent is what refuses it."""
    claimed(app)
    runtime = FakeRuntime()
    create(app, runtime)
    runtime.exists = True  # as LocalRuntime answers for a name it has
    before = head(app)
    create(app, runtime)
    assert [c["name"] for c in runtime.created] == [DEPLOYER, DEPLOYER]
    assert head(app) == before


def test_a_second_create_after_the_report_does_not_reach_the_runtime(app: Any) -> None:
    claimed(app)
    runtime = FakeRuntime()
    create(app, runtime)
    report(app, Action(Kind.RECORD_CREATED, "app", 1, 1, name=DEPLOYER))
    create(app, runtime)
    assert [c["name"] for c in runtime.created] == [DEPLOYER]


def test_a_name_the_runtime_already_has_is_not_an_error_and_appends_nothing(app: Any) -> None:
    claimed(app)
    runtime = FakeRuntime(exists=True)
    before = head(app)
    create(app, runtime)
    assert [c["name"] for c in runtime.created] == [DEPLOYER]
    assert head(app) == before
    deployment = app.deployment(app.config("app"), 1)
    assert (deployment.phase, deployment.step.created) == ("Pending", False)


# -- reports --------------------------------------------------------------------------


def report(app: Any, *batch: Action) -> None:
    Executor(app, FakeRuntime(), ME, "tester@test", "/").run_batch(batch)


def test_created_started_and_exited_seen_in_one_pass_are_one_append(app: Any) -> None:
    claimed(app)
    before = head(app)
    report(
        app,
        Action(Kind.RECORD_CREATED, "app", 1, 1, name=DEPLOYER),
        Action(Kind.RECORD_STARTED, "app", 1, 1, name=DEPLOYER),
        Action(Kind.RECORD_EXIT, "app", 1, 1, name=DEPLOYER, exit_code=0),
    )
    appended = app.recorder.select_notifications(before + 1, 100)
    # In the order three separate reports would have appended them (the slot's release with the last).
    assert [n.topic.rsplit(".", 1)[-1] for n in appended] == [
        "DeployerCreated",
        "DeployerStarted",
        "RolloutEnded",
        "DeployerSucceeded",
    ]
    assert len({n.originator_id for n in appended}) == 2  # the deployment and its config, in one save
    assert app.deployment(app.config("app"), 1).phase == "Complete"


def test_a_batch_records_what_is_not_stale_and_skips_what_is(app: Any) -> None:
    claimed(app)
    report(app, Action(Kind.RECORD_CREATED, "app", 1, 1, name=DEPLOYER))
    before = head(app)
    report(
        app,
        Action(Kind.RECORD_CREATED, "app", 1, 1, name=DEPLOYER),  # already recorded: stale
        Action(Kind.RECORD_STARTED, "app", 1, 1, name=DEPLOYER),
    )
    assert types_after(app, before) == ["DeployerStarted"]


def test_a_batch_about_a_step_the_log_has_moved_past_appends_nothing(app: Any) -> None:
    claimed(app)
    commands.report(app, "app", 1, lambda d: d.report_lost(DEPLOYER, "gone", meta()), meta())
    before = head(app)
    report(
        app,
        Action(Kind.RECORD_CREATED, "app", 1, 1, name=DEPLOYER),
        Action(Kind.RECORD_EXIT, "app", 1, 1, name=DEPLOYER, exit_code=0),
    )
    assert head(app) == before
    assert app.deployment(app.config("app"), 1).phase == "Failed"


def test_only_reports_are_batched(app: Any) -> None:
    with pytest.raises(ValueError, match="only reports"):
        report(
            app,
            Action(Kind.CREATE, "app", 1, 1, name=DEPLOYER),
            Action(Kind.RECORD_CREATED, "app", 1, 1, name=DEPLOYER),
        )


# -- the claim ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "first"),
    [(Spec(command=["true"]), DEPLOYER), (Spec(command=["true"], pre_hook=Hook(command=["true"])), "app-1-hook-pre-1")],
    ids=["deployer", "pre-hook"],
)
def test_claim_commits_the_claim_and_returns_the_first_step(app: Any, spec: Spec, first: str) -> None:
    triggered(app, spec)
    before = head(app)
    assert commands.claim(app, "app", 1, ME, meta()) == first
    assert sorted(types_after(app, before)) == ["DeployerClaimed", "SlotClaimed"]
    assert app.deployment(app.config("app"), 1).claimant == ME


def test_a_claim_action_creates_the_first_step_at_once_through_the_create_guard(app: Any) -> None:
    triggered(app)
    runtime = FakeRuntime()
    before = head(app)

    def create_after_the_claim(name: str, **details: Any) -> None:
        assert sorted(types_after(app, before)) == ["DeployerClaimed", "SlotClaimed"]  # committed first
        FakeRuntime.create(runtime, name, **details)

    runtime.create = create_after_the_claim  # type: ignore[method-assign]
    Executor(app, runtime, ME, "tester@test", "/").run(Action(Kind.CLAIM, "app", 1, 1))
    assert [c["name"] for c in runtime.created] == [DEPLOYER]
    assert sorted(types_after(app, before)) == ["DeployerClaimed", "SlotClaimed"]


def test_a_refused_claim_action_creates_nothing(app: Any) -> None:
    claimed(app)
    app.latest("app", None, True, meta())
    runtime = FakeRuntime()
    before = head(app)
    Executor(app, runtime, ME, "tester@test", "/").run(Action(Kind.CLAIM, "app", 2, 1))
    assert runtime.created == []
    assert head(app) == before


def test_claim_is_refused_and_appends_nothing_while_an_older_revision_holds_the_slot(app: Any) -> None:
    claimed(app)
    app.latest("app", None, True, meta())  # version 2 waits; version 1 is asked to cancel
    before = head(app)
    assert commands.claim(app, "app", 2, ME, meta()) is None
    assert head(app) == before
    assert app.deployment(app.config("app"), 2).phase == "New"


@pytest.mark.parametrize("claimant", [ME, OTHER])
def test_claim_of_a_revision_already_claimed_is_refused_and_appends_nothing(app: Any, claimant: str) -> None:
    claimed(app)
    before = head(app)
    assert commands.claim(app, "app", 1, claimant, meta()) is None
    assert head(app) == before
    assert app.deployment(app.config("app"), 1).claimant == ME


# -- a pass's claims and reports, each group in one append ------------------------------


def two_configs(app: Any) -> None:
    for name in ("app", "web"):
        app.create_config(name, Spec(command=["true"]), meta())
        app.latest(name, None, False, meta())


def counting_saves(app: Any, monkeypatch: pytest.MonkeyPatch, fail_first: bool = False) -> list[int]:
    """Wrap app.save: the number of objects (aggregates, events) of each call; the first fails if asked."""
    calls: list[int] = []
    real = app.save

    def save(*aggregates: Any, **kwargs: Any) -> Any:
        calls.append(len(aggregates))
        if fail_first and len(calls) == 1:
            raise IntegrityError("a rival wrote first")
        return real(*aggregates, **kwargs)

    monkeypatch.setattr(app, "save", save)
    return calls


def claims_of(*configs: str) -> list[tuple[Action, ...]]:
    return [(Action(Kind.CLAIM, config, 1, 1),) for config in configs]


def test_the_claims_of_a_pass_are_one_append_and_each_step_is_created_after_it(
    app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    two_configs(app)
    runtime = FakeRuntime()
    saves = counting_saves(app, monkeypatch)
    failures = Executor(app, runtime, ME, "tester@test", "/").run_group(claims_of("app", "web"), {})
    assert failures == []
    assert saves == [4]  # two configs and two deployments, in one save
    assert sorted(c["name"] for c in runtime.created) == ["app-1-deploy-1", "web-1-deploy-1"]
    assert {app.deployment(app.config(n), 1).claimant for n in ("app", "web")} == {ME}


def test_a_claim_taken_meanwhile_is_left_out_of_the_group(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    two_configs(app)
    assert commands.claim(app, "web", 1, OTHER, meta()) is not None  # a twin was first
    runtime = FakeRuntime()
    saves = counting_saves(app, monkeypatch)
    Executor(app, runtime, ME, "tester@test", "/").run_group(claims_of("app", "web"), {})
    assert [c["name"] for c in runtime.created] == ["app-1-deploy-1"]
    assert saves == [2]
    assert app.deployment(app.config("web"), 1).claimant == OTHER


def test_a_group_whose_append_conflicts_is_decided_again_each_alone(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    two_configs(app)
    runtime = FakeRuntime()
    before = head(app)
    saves = counting_saves(app, monkeypatch, fail_first=True)
    assert Executor(app, runtime, ME, "tester@test", "/").run_group(claims_of("app", "web"), {}) == []
    assert saves == [4, 2, 2]  # the group failed whole; then each claim alone
    assert sorted(types_after(app, before)) == ["DeployerClaimed"] * 2 + ["SlotClaimed"] * 2
    assert sorted(c["name"] for c in runtime.created) == ["app-1-deploy-1", "web-1-deploy-1"]


def test_the_reports_of_a_pass_are_one_append(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    two_configs(app)
    for name in ("app", "web"):
        assert commands.claim(app, name, 1, ME, meta()) is not None
    saves = counting_saves(app, monkeypatch)
    group = [
        (
            Action(Kind.RECORD_CREATED, name, 1, 1, name=f"{name}-1-deploy-1"),
            Action(Kind.RECORD_EXIT, name, 1, 1, name=f"{name}-1-deploy-1", exit_code=0),
        )
        for name in ("app", "web")
    ]
    executor = Executor(app, FakeRuntime(), ME, "tester@test", "/")
    assert executor.run_group(group, {}) == []
    assert len(saves) == 1
    assert {app.deployment(app.config(n), 1).phase for n in ("app", "web")} == {"Complete"}
    assert executor.ended == {"app", "web"}


def test_a_deployment_the_executor_saw_end_leaves_the_applications_cache_and_its_config_stays(app: Any) -> None:
    """Found by a controller's RSS over 40,000 rollouts of 200 configs (2.1x of its start): ended
    deployments filled the application's cache (an LRU of 500) and pushed configs out of it; each such
    config's next load replayed its whole history (no snapshots), a read that grew with every rollout and
    left the process's memory higher after each. Ended alone or in a pass's group, a deployment leaves."""
    cache = app.repository.cache.cache
    two_configs(app)
    configs = {ids.config_id(name) for name in ("app", "web")}
    for revision in range(1, 5):
        for name in ("app", "web"):
            if revision > 1:
                app.latest(name, None, False, meta())
            assert commands.claim(app, name, revision, ME, meta()) is not None
        assert ids.deployment_id(ids.config_id("app"), revision) in cache  # loaded by the claim: cached
        ends = [  # app succeeds, web fails
            (Action(Kind.RECORD_EXIT, name, revision, 1, name=f"{name}-{revision}-deploy-1", exit_code=code),)
            for name, code in (("app", 0), ("web", 3))
        ]
        if revision % 2:  # a pass's group: one save
            assert Executor(app, FakeRuntime(), ME, "tester@test", "/").run_group(ends, {}) == []
        else:  # each alone
            for batch in ends:
                report(app, *batch)
        assert set(cache) == configs, f"revision {revision}: {len(cache)} cached"
    app.latest("app", None, False, meta())
    assert commands.claim(app, "app", 5, ME, meta()) is not None
    report(app, Action(Kind.RECORD_CREATED, "app", 5, 1, name="app-5-deploy-1"))  # still running: stays
    assert set(cache) == configs | {ids.deployment_id(ids.config_id("app"), 5)}
    assert [app.deployment(app.config(n), 4).phase for n in ("app", "web")] == ["Complete", "Failed"]


def test_other_actions_are_not_decided_together(app: Any) -> None:
    with pytest.raises(ValueError, match="together"):
        Executor(app, FakeRuntime(), ME, "tester@test", "/").run_group([(Action(Kind.STOP, "app", 1, 1),)], {})


class BatchingRuntime(FakeRuntime):
    """Records which creates happened inside its batched() (one transaction in LocalRuntime)."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        self._open: list[str] | None = None

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        self._open = []
        yield
        self.batches.append(self._open)
        self._open = None

    def _record(self, call: dict[str, Any]) -> None:
        super()._record(call)
        if self._open is not None:
            self._open.append(call["name"])


def test_the_creates_of_a_pass_claims_share_one_runtime_batch(app: Any) -> None:
    two_configs(app)
    runtime = BatchingRuntime()
    Executor(app, runtime, ME, "tester@test", "/").run_group(claims_of("app", "web"), {})
    assert [sorted(batch) for batch in runtime.batches] == [["app-1-deploy-1", "web-1-deploy-1"]]


def test_decisions_taken_together_left_their_reads_behind_for_ever(app: Any) -> None:
    """Found by a tracemalloc diff of a long controller run: loads inside commands.together()
    were recorded for decide()'s torn-read check, which together() never runs nor clears,
    so a running controller's memory grew with every pass (about 90 bytes per load)."""
    for name in ("a", "b", "c"):
        app.create_config(name, Spec(command=["true"]), meta())
    for _ in range(5):
        for name in ("a", "b", "c"):
            app.latest(name, None, True, meta())
        revision = app.config("a").latest_revision
        decisions = [commands.claim_decision(app, n, revision, ME, meta()) for n in ("a", "b", "c")]
        assert commands.together(app, decisions) is not None
    assert len(app._reads) <= 6, "reads of earlier decisions are still held"


# -- a pass's group reads its aggregates and claims at once (adapters.preload), on both stores -------


@pytest.fixture
def apps_on(tmp_path: Path, backend_store: str | None) -> Iterator[tuple[Any, Any]]:
    """Two applications (this controller's, and a twin's) on one log of each store."""
    home = Home(tmp_path / "h")
    ours, twins = open_app(home, backend_store), open_app(home, backend_store)
    yield ours, twins
    ours.close()
    twins.close()


def test_a_claim_a_twin_takes_between_the_groups_read_and_its_save_is_made_once(
    apps_on: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's save conflicts; each claim is then decided alone on fresh reads (I4), not on the
    group's: the twin's claim stands, ours is made for the other deployment, one deployer each (I1)."""
    app, twin = apps_on
    two_configs(app)
    window = app.preloaded

    @contextlib.contextmanager
    def read_then_raced(streams: Any) -> Iterator[None]:
        with window(streams):
            if not twin_claimed:
                twin_claimed.append(commands.claim(twin, "web", 1, OTHER, meta()))
            yield

    twin_claimed: list[Any] = []
    monkeypatch.setattr(app, "preloaded", read_then_raced)
    runtime = FakeRuntime()
    assert Executor(app, runtime, ME, "tester@test", "/").run_group(claims_of("app", "web"), {}) == []
    assert twin_claimed == ["web-1-deploy-1"]
    assert [c["name"] for c in runtime.created] == ["app-1-deploy-1"]
    assert [app.deployment(app.config(n), 1).claimant for n in ("app", "web")] == [ME, OTHER]


class RowsRuntime(FakeRuntime):
    """Answers get() with the rows it is given."""

    def __init__(self, rows: dict[str, Observed]) -> None:
        super().__init__()
        self.rows = rows

    def get(self, name: str) -> Observed | None:
        return self.rows.get(name)


def exited_row(name: str, claim: str) -> Observed:
    config = name.split("-")[0]
    return Observed(name, config, 1, 1, "exited", 0, None, "2026-01-01T00:00:00+00:00", None, False, claim)


def test_the_reports_of_a_group_match_each_row_against_the_claim_of_its_own_deployment(
    apps_on: tuple[Any, Any],
) -> None:
    """I7 in a group, whose claims are read at once: the row made for app's claim completes app; the
    row named for web but made for a claim of another log fails web, and says why."""
    app, _ = apps_on
    two_configs(app)
    for name in ("app", "web"):
        assert commands.claim(app, name, 1, ME, meta()) is not None
    executor = Executor(app, FakeRuntime(), ME, "tester@test", "/")
    ours = executor.claim_token(app.deployment(app.config("app"), 1))
    executor.runtime = RowsRuntime(
        {"app-1-deploy-1": exited_row("app-1-deploy-1", ours), "web-1-deploy-1": exited_row("web-1-deploy-1", ours)}
    )
    group = [
        (
            Action(Kind.RECORD_CREATED, name, 1, 1, name=f"{name}-1-deploy-1"),
            Action(Kind.RECORD_EXIT, name, 1, 1, name=f"{name}-1-deploy-1", exit_code=0),
        )
        for name in ("app", "web")
    ]
    assert executor.run_group(group, {}) == []
    app_deployment, web_deployment = (app.deployment(app.config(n), 1) for n in ("app", "web"))
    assert app_deployment.phase == "Complete"
    assert web_deployment.phase == "Failed"
    assert "no claim of this log made" in (web_deployment.reason or "")


# -- a stop is written before it is made (7.11) -------------------------------------------


class StoppingRuntime(FakeRuntime):
    """A runtime whose step is running: each stop records what the log held when the signal went out."""

    def __init__(self, app: Any) -> None:
        super().__init__()
        self.app = app
        self.stopped: list[tuple[str, list[str]]] = []
        self.gone = False

    def tombstone(self, name: str, *, config: str, revision: int, attempt: int, reason: str) -> bool:
        return False  # a row exists: the process is stopped, not pre-empted

    def stop(self, name: str, *, reason: str, grace: float = 5.0) -> None:
        self.stopped.append((name, types_after(self.app, 0)))
        self.gone = True

    def get(self, name: str) -> Observed | None:
        return None


def test_a_timeout_appends_its_stop_before_the_signal_and_ends_the_attempt_after(app: Any) -> None:
    claimed(app)
    runtime = StoppingRuntime(app)
    executor = Executor(app, runtime, ME, "tester@test", "/")
    executor.run(Action(Kind.TIMEOUT, "app", 1, 1, name=DEPLOYER, reason="timeout: attempt exceeded 1s"))
    [(name, before)] = runtime.stopped
    assert name == DEPLOYER and before[-1] == "StopRequested"
    after = types_after(app, 0)
    assert after.index("StopRequested") < after.index("DeployerFailed")  # the attempt ends once the row is gone


def test_a_measurement_past_its_timeout_appends_its_stop_before_the_signal_once(app: Any) -> None:
    claimed(app, spec=Spec(command=["true"], verify=["true"]))
    executor = Executor(app, FakeRuntime(), ME, "tester@test", "/")
    for kind in (Kind.RECORD_CREATED, Kind.RECORD_STARTED):
        executor.run(Action(kind, "app", 1, 1, name=DEPLOYER))
    executor.run(Action(Kind.RECORD_EXIT, "app", 1, 1, name=DEPLOYER, exit_code=0))
    measurement = step_of(app)
    assert measurement is not None and measurement.kind == "verify"
    executor.run(Action(Kind.RECORD_CREATED, "app", 1, 1, name=measurement.name))
    runtime = StoppingRuntime(app)
    executor = Executor(app, runtime, ME, "tester@test", "/")
    stop = Action(Kind.STOP_MEASUREMENT, "app", 1, 1, name=measurement.name, reason="timeout: measurement exceeded 1s")
    executor.run(stop)
    executor.run(stop)  # the next pass, while it dies: no second record
    assert [before[-1] for _, before in runtime.stopped] == ["StopRequested", "StopRequested"]
    assert types_after(app, 0).count("StopRequested") == 1
