"""Carrying out a plan: runtime calls and appends, each checked against the log first."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from uuid import UUID

from ...domain import ids, phases
from ...domain.deployment import Deployment
from ...domain.errors import DomainError, NotFound
from ...domain.freeze import ALL_ID
from ...domain.measured import Measured
from ...domain.meta import Meta
from ..runtime.port import UNKNOWN_CLAIM, DeployerExists, Observed, Runtime, claim_text
from ..service import analysis, commands
from ..service.application import RolloutsApp, WriteConflict, new_meta
from ..service.claims import env_value as claim_env
from ..service.launch import Launch, launch_spec
from ..service.moves import log_ids_by_position
from .plan import REPORTS, Action, Kind, is_gone
from .reports import REPORTERS, record_exit, said_in


class Executor:
    """Runs actions for one controller (`claimant`) against the app and a runtime."""

    def __init__(
        self,
        app: RolloutsApp,
        runtime: Runtime,
        claimant: str,
        actor: str,
        cwd: str,
        fence: Mapping[str, str] | None = None,
    ) -> None:
        """`fence`: ROLLOUT_HOME and ROLLOUT_STORE, given to every process with its ROLLOUT_CLAIM (7.7)."""
        self.app = app
        self.fence = dict(fence or {})
        self.runtime = runtime
        self.claimant = claimant
        self.actor = actor
        self.cwd = cwd
        self.ended: set[str] = set()
        self._writers: Callable[[int], str] | None = None  # which log wrote each position, read once a pass
        # The claims of a group's deployments, read at once (see _reading): the streams asked, what was found
        self._claims: tuple[set[UUID], dict[UUID, tuple[int, str | None]]] | None = None

    def begin_pass(self) -> None:
        """Forget what was read of the log in the last pass (its id: a rebind may change it)."""
        self._writers = None

    def writer_of(self, position: int) -> str:
        """The id of the log that wrote `position` (its own, or an origin's: see log_move)."""
        if self._writers is None:
            self._writers = log_ids_by_position(self.app)
        return self._writers(position)

    def meta(self, notification_id: int | None = None) -> dict[str, Any]:
        return new_meta(
            self.actor, self.app.recorder.session_user(), notification_id=notification_id, claimant=self.claimant
        )

    def run(self, action: Action, notification_id: int | None = None) -> None:
        self.run_batch((action,), notification_id)

    def run_batch(self, batch: Sequence[Action], notification_id: int | None = None) -> None:
        """One action, or reports about one deployer (plan.batches) decided and saved at once."""
        meta = self.meta(notification_id)
        first = batch[0]
        if first.kind not in REPORTS:
            if len(batch) > 1:
                raise ValueError(f"only reports are batched, not {[str(a.kind) for a in batch]}")
            HANDLERS[first.kind](self, first, meta)
            return
        changed = commands.report(self.app, first.config, first.revision, self._change(batch, meta), meta)
        self._ended(first, changed)
        for create in self._due_now(first, changed):
            self._create(create, self.meta())

    def _due_now(self, a: Action, changed: Deployment | None) -> list[Action]:
        """The step a report just made current, when it is ours to create at once (a process with no wait):
        created in this pass, not the next (one pass per step or measurement, not two). The create
        re-reads the log first, as every create does."""
        if changed is None or not changed.is_open or changed.step is None:
            return []
        step = changed.step
        if not step.runs or step.created or step.delay != 0 or changed.claimant != self.claimant:
            return []
        if changed.cancel_requested:
            return []
        return [dataclasses.replace(a, kind=Kind.CREATE, name=step.name, attempt=changed.attempt)]

    def run_group(
        self, batches: Sequence[tuple[Action, ...]], notification_ids: Mapping[tuple[str, int], int | None]
    ) -> list[tuple[tuple[Action, ...], Exception]]:
        """Claims, or report batches, of different deployments: decided each on fresh state and
        appended in one save (one commit for a whole pass); each alone if that save conflicts.
        A committed claim's first step is then created, as by a claim alone. Returns the
        batches that failed, with why (a write still conflicting, a refusal)."""
        if not batches:
            return []
        metas = [self.meta(notification_ids.get((b[0].config, b[0].revision))) for b in batches]
        if any(b[0].kind != Kind.CLAIM and b[0].kind not in REPORTS for b in batches):
            raise ValueError("only claims and reports are decided together")
        claims = batches[0][0].kind == Kind.CLAIM
        with self._reading([b[0] for b in batches], claims=not claims):
            if claims:  # those a twin has claimed meanwhile are left out at once
                due = [(b, m) for b, m in zip(batches, metas, strict=True) if self._new(b[0])]
            else:
                due = list(zip(batches, metas, strict=True))
            decisions = [self._decision(b, m) for b, m in due]
            results = commands.together(self.app, decisions) if len(decisions) > 1 else None
        failures: list[tuple[tuple[Action, ...], Exception]] = []
        creates: list[Action] = []
        for i, (batch, _) in enumerate(due):
            try:
                if results is None:  # each decided alone, on its own fresh reads (after the block above)
                    self.run_batch(batch, notification_ids.get((batch[0].config, batch[0].revision)))
                elif claims and results[i] is not None:
                    creates.append(dataclasses.replace(batch[0], kind=Kind.CREATE, name=results[i]))
                elif not claims:
                    self._ended(batch[0], results[i])
                    creates += self._due_now(batch[0], results[i])
            except (WriteConflict, DomainError, NotFound) as error:
                failures.append((batch, error))
        return failures + self._create_all(creates)

    def _create_all(self, creates: Sequence[Action]) -> list[tuple[tuple[Action, ...], Exception]]:
        """The creates of committed claims, each checked against the log first, their runtime rows
        inserted together (one sync to disk, in LocalRuntime) by the runtime's batched()."""
        ready: list[tuple[Action, int, Launch, str]] = []
        failures: list[tuple[tuple[Action, ...], Exception]] = []
        with self._reading(creates, claims=True, configs=False):  # re-read after the claims' commit
            for a in creates:
                try:
                    launch = self._launch(a)
                except (DomainError, NotFound) as error:
                    failures.append(((a,), error))
                    continue
                if launch is not None:
                    ready.append(launch)
        with self.runtime.batched() if len(ready) > 1 else contextlib.nullcontext():
            for launch in ready:
                self._runtime_create(*launch)
        return failures

    @contextlib.contextmanager
    def _reading(self, actions: Sequence[Action], *, claims: bool, configs: bool = True) -> Iterator[None]:
        """For several actions: their deployments (and configs, and the freeze of all) read in one query,
        served to every load in the block, and then, if `claims`, their claims (claim_token) in another.
        Read in that order, a claim newer than the deployment a decision read makes its save conflict.
        Whatever is decided again alone, after the block, reads afresh."""
        if len(actions) < 2:
            yield
            return
        deployments = [ids.deployment_id(ids.config_id(a.config), a.revision) for a in actions]
        streams = [*deployments, *([ids.config_id(a.config) for a in actions] + [ALL_ID] if configs else [])]
        with self.app.preloaded(streams):
            if claims:
                self._claims = (set(deployments), self.app.recorder.claims_of(deployments))
            try:
                yield
            finally:
                self._claims = None

    def _new(self, a: Action) -> bool:
        try:
            return commands.is_new(self.app, a.config, a.revision)
        except NotFound:
            return False

    def _decision(self, batch: tuple[Action, ...], meta: dict[str, Any]) -> commands.Decider:
        a = batch[0]
        if a.kind == Kind.CLAIM:
            return commands.claim_decision(self.app, a.config, a.revision, self.claimant, meta)
        return commands.report_decision(self.app, a.config, a.revision, self._change(batch, meta), meta)

    def _change(self, batch: Sequence[Action], meta: dict[str, Any]) -> commands.Report:
        changes = [
            record_exit(_name(a), a, meta, self._said)
            if a.kind == Kind.RECORD_EXIT
            else REPORTERS[a.kind](_name(a), a, meta)
            for a in batch
        ]
        name = _name(batch[0])
        row = self.runtime.get(name) if name else None

        def change(d: Deployment) -> bool:
            foreign = self._foreign(d, name, row)
            if foreign is not None:  # never taken for ours (I7): the deployment fails, and says why
                return d.report_lost(name, foreign, meta)
            # Each report checks the deployment as the ones before it left it; all of them are applied.
            return any([change(d) for change in changes])

        return change

    # -- actions -------------------------------------------------------------

    def _claim(self, a: Action, meta: dict[str, Any]) -> None:
        """Claim, then create at once: the claim is committed, and the create re-checks the log."""
        step = commands.claim(self.app, a.config, a.revision, self.claimant, meta)
        if step is not None:
            self._create(dataclasses.replace(a, kind=Kind.CREATE, name=step), meta)

    def _create(self, a: Action, meta: dict[str, Any]) -> None:
        """Create only for a committed claim, re-read from the log; the runtime refuses a used name.

        DeployerCreated is appended by a later pass, from the runtime's row, together with
        whatever else that row then shows (started, exited): usually one append for all three.
        """
        launch = self._launch(a)
        if launch is not None:
            self._runtime_create(*launch)

    def _launch(self, a: Action) -> tuple[Action, int, Launch, str] | None:
        """What to create for `a`, if the log says it is the current, uncreated step of our claim."""
        deployment = commands.current_step(self.app, a.config, a.revision, _name(a), self.claimant)
        if deployment is None:
            return None
        launch = launch_spec(deployment, os.environ, self.cwd, analysis.measured_template(self.app, deployment))
        return a, deployment.attempt, launch, self.claim_token(deployment)

    def _runtime_create(self, a: Action, attempt: int, launch: Launch, claim: str) -> None:
        # DeployerExists: created before (by us before a crash, or by a twin controller): reported all the same,
        # if the row names our claim (else it is a deployer of another history, and the report says so).
        log_id, position, _ = claim.split(":", 2)
        env = {**launch.env, **self.fence, "ROLLOUT_CLAIM": claim_env(log_id, int(position))}
        with contextlib.suppress(DeployerExists):
            self.runtime.create(
                _name(a),
                config=a.config,
                revision=a.revision,
                attempt=attempt,
                argv=launch.argv,
                env=env,
                pass_env=launch.pass_env,
                cwd=self.cwd,
                claim=claim,
            )

    def claim_token(self, deployment: Deployment) -> str:
        """The claim a runtime row must name to be this attempt's deployer (I7): the log's id, and the
        position and hash of the attempt's DeployerClaimed event. Deployment and attempt alone are not
        enough: an older copy of the same log, or another log, reuses them."""
        if self._claims is not None and deployment.id in self._claims[0]:
            position, digest = self._claims[1].get(deployment.id) or (0, None)  # read with the group's
        else:
            position, digest = self.app.recorder.claim_of(deployment.id) or (0, None)
        return claim_text(self.writer_of(position), position, digest)

    def _foreign(self, deployment: Deployment, name: str, row: Observed | None) -> str | None:
        """Why the runtime row holding `name` is not this deployment's deployer, or None if it is."""
        if row is None or row.claim is None or not deployment.is_current(name):
            return None  # no row, or one made before claims were recorded (adopted until a rebind)
        if row.claim == self.claim_token(deployment):
            return None
        made_for = "no claim this home can match" if row.claim == UNKNOWN_CLAIM else f"claim {row.claim}"
        return (
            f"the name is held by a runtime row that no claim of this log made (made for {made_for});"
            " retry opens a new attempt"
        )

    def _stop(self, a: Action, meta: dict[str, Any]) -> None:
        """A cancel: stop what still runs (or tombstone the name of a step not yet created), then confirm it."""
        self._end_attempt(a, lambda d: d.is_open and d.cancel_requested, lambda d: d.confirm_cancelled(meta), meta)

    def _timeout(self, a: Action, meta: dict[str, Any]) -> None:
        self._end_attempt(
            a,
            lambda d: d.is_open and d.phase != phases.NEW,
            lambda d: d.time_out(d.typed_spec().timeout, meta),
            meta,
            stop=a.reason or "timeout",
        )

    def _end_attempt(
        self,
        a: Action,
        due: Callable[[Deployment], bool],
        end: Callable[[Deployment], None],
        meta: dict[str, Any],
        stop: str | None = None,
    ) -> None:
        """Stop what runs NOW according to the log (not the plan's view), then end the attempt
        only if that is still the current step: a stale plan must not leave a later step running.
        `stop`: why, when the log does not say it yet (a timeout; a cancel or an abort is asked in the
        log already): appended before the signal, so `claim check` answers 1 from then on (7.11)."""
        deployment = self.app.deployment(self.app.config(a.config), a.revision)
        if not (due(deployment) and deployment.attempt == a.attempt):
            return
        name = deployment.step.name if deployment.step else None
        process = name if deployment.step is not None and deployment.step.runs else None  # a pause runs none
        if stop is not None and process is not None and deployment.stopping != process:

            def decided(d: Deployment) -> bool:
                return due(d) and d.attempt == a.attempt and d.request_stop(process, stop, meta)

            self._report(a, decided, meta)
        self._halt(dataclasses.replace(a, name=process))
        row = self.runtime.get(process) if process else None
        if row is not None and not is_gone(row):
            return  # still dying (another controller's stop in its grace): end the attempt on a later pass

        def change(d: Deployment) -> bool:
            if not (due(d) and d.attempt == a.attempt and (d.step.name if d.step else None) == name):
                return False
            end(d)
            return True

        self._report(a, change, meta)

    def _end_pause(self, a: Action, meta: dict[str, Any]) -> None:
        """A timed pause that has run its time, decided again on the log: the attempt goes on."""

        def change(d: Deployment) -> bool:
            pause = d.paused
            if pause is None or pause.name != a.name or pause.delay is None or d.claimant != self.claimant:
                return False
            d.end_pause(meta)
            return True

        changed = commands.report(self.app, a.config, a.revision, change, meta)
        self._ended(a, changed)
        for create in self._due_now(a, changed):
            self._create(create, self.meta())

    def _take_over(self, a: Action, meta: dict[str, Any]) -> None:
        """Go on with a claim whose claimant's lease ended while nothing ran (the plan saw it expired),
        decided again on the log: only while the attempt is still paused or between measurements."""

        def change(d: Deployment) -> bool:
            if d.attempt != a.attempt or not d.nothing_runs or d.claimant == self.claimant:
                return False
            if (d.step.name if d.step else None) != a.name:
                return False
            d.take_over(self.claimant, meta)
            return True

        self._report(a, change, meta)

    def _stop_measurement(self, a: Action, meta: dict[str, Any]) -> None:
        """A measurement past --verify-timeout: its stop appended (7.11), then made; its row's end is then
        reported (inconclusive) and the attempt goes on."""
        name, why = _name(a), a.reason or "timeout"

        def decided(d: Deployment) -> bool:
            return d.is_current(name) and d.claimant == self.claimant and d.request_stop(name, why, meta)

        deployment = commands.peek(self.app, ids.deployment_id(ids.config_id(a.config), a.revision))
        if deployment.is_current(name) and deployment.claimant == self.claimant:
            if deployment.stopping != name:
                self._report(a, decided, meta)
            self.runtime.stop(name, reason=why)

    # -- helpers -------------------------------------------------------------

    def _halt(self, a: Action) -> None:
        """Stop the deployer; with no row yet, a tombstone stops a create in flight elsewhere."""
        if a.name is None:
            return
        if not self.runtime.tombstone(
            a.name, config=a.config, revision=a.revision, attempt=a.attempt, reason=a.reason or "stopped"
        ):
            self.runtime.stop(a.name, reason=a.reason or "stopped")

    def _said(self, name: str) -> Measured | None:
        return said_in(self.runtime.log_path(name))

    def _report(self, a: Action, change: commands.Report, meta: dict[str, Any]) -> None:
        self._ended(a, commands.report(self.app, a.config, a.revision, change, meta))

    def _ended(self, a: Action, changed: Deployment | None) -> None:
        if changed is not None and changed.is_terminal:
            self.ended.add(a.config)  # the pass that ends a deployment prunes (history limit)
            # Done with: kept in the app's cache (an LRU), ended ones pushed out configs, each reload a whole history
            self.app.repository.forget(changed.id)


# -- what each kind of action does (plan.Kind): one handler each, held by a unit test --------------

Handler = Callable[[Executor, Action, Meta], None]
HANDLERS: dict[Kind, Handler] = {
    Kind.CLAIM: Executor._claim,
    Kind.CREATE: Executor._create,
    Kind.STOP: Executor._stop,
    Kind.CANCEL: Executor._stop,  # the plan's cancel has nothing left to stop: _stop then only confirms it
    Kind.TIMEOUT: Executor._timeout,
    Kind.END_PAUSE: Executor._end_pause,
    Kind.STOP_MEASUREMENT: Executor._stop_measurement,
    Kind.TAKE_OVER: Executor._take_over,
}


def _name(a: Action) -> str:
    """The deployer an action is about; "" when it names none (then it matches no step of the log)."""
    return a.name or ""
