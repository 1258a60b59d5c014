"""The executor's create guard and the claim, each checked on its own against a real event log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.application import new_meta
from adapters.controller import commands
from adapters.controller.executor import Executor
from adapters.controller.plan import Action
from adapters.eventstore import open_app
from adapters.home import Home
from adapters.runtime.local import DeployerExists
from domain.spec import Hook, Spec

ME = "claimant-me"
OTHER = "claimant-other"
DEPLOYER = "app-1-deploy-1"


class FakeRuntime:
    """Records create() calls; `exists` makes it answer as for a name used before."""

    def __init__(self, exists: bool = False) -> None:
        self.exists = exists
        self.created: list[dict[str, Any]] = []

    def create(self, name: str, **details: Any) -> None:
        self.created.append({"name": name, **details})
        if self.exists:
            raise DeployerExists(name)


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
    executor.run(Action("create", "app", 1, attempt, name=name))


def step_of(app: Any) -> dict[str, Any] | None:
    return app.deployment(app.config("app"), 1).step


# -- the create guard ---------------------------------------------------------------


def test_create_runs_the_current_step_of_a_committed_claim_and_records_it(app: Any, tmp_path: Path) -> None:
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
    assert types_after(app, before) == ["DeployerCreated"]


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
    assert step_of(app)["name"] == DEPLOYER  # type: ignore[index]
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


def test_a_second_create_of_the_same_step_does_not_reach_the_runtime(app: Any) -> None:
    claimed(app)
    runtime = FakeRuntime()
    create(app, runtime)
    create(app, runtime)
    assert [c["name"] for c in runtime.created] == [DEPLOYER]


def test_a_name_the_runtime_already_has_is_only_recorded_as_created(app: Any) -> None:
    claimed(app)
    runtime = FakeRuntime(exists=True)
    before = head(app)
    create(app, runtime)
    assert [c["name"] for c in runtime.created] == [DEPLOYER]
    assert types_after(app, before) == ["DeployerCreated"]
    deployment = app.deployment(app.config("app"), 1)
    assert (deployment.phase, deployment.step["created"]) == ("Pending", True)  # type: ignore[index]


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
    Executor(app, runtime, ME, "tester@test", "/").run(Action("claim", "app", 1, 1))
    assert [c["name"] for c in runtime.created] == [DEPLOYER]
    appended = types_after(app, before)
    assert sorted(appended) == ["DeployerClaimed", "DeployerCreated", "SlotClaimed"]
    assert appended[-1] == "DeployerCreated"  # the create follows the committed claim


def test_a_refused_claim_action_creates_nothing(app: Any) -> None:
    claimed(app)
    app.latest("app", None, True, meta())
    runtime = FakeRuntime()
    before = head(app)
    Executor(app, runtime, ME, "tester@test", "/").run(Action("claim", "app", 2, 1))
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
