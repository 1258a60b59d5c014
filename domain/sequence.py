"""What an attempt runs, in order (DESIGN 7.6): pre hook, then for each step its deployer, its
measurements and (not after the last step) its pause, then the post hook. Pure: decided from the
deployment's frozen spec and what its attempt has done, as the events record it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import ids
from .step import DEPLOYER, INCONCLUSIVE, PAUSE, POST, PRE, STEP_PAUSE, VERIFY, Step

PASSED, FAILED, INCONCLUSIVE_OUTCOME = "passed", "failed", "inconclusive"
OUTCOMES = (PASSED, FAILED, INCONCLUSIVE_OUTCOME)


def outcome_of(exit_code: int | None) -> str:
    """A measurement's outcome from its exit: 0 passed, 1 failed, anything else (another code, a
    signal, a timeout, a process gone) inconclusive."""
    return {0: PASSED, 1: FAILED}.get(exit_code if exit_code is not None else -1, INCONCLUSIVE_OUTCOME)


class Source(NamedTuple):
    """What a step's verification measures, each with its own cadence and limits (DESIGN 7.9): the config's
    --verify (template None), or an analysis template as the attempt's claim fixed it."""

    template: str | None
    measurements: int  # how many the step's verification takes of it
    interval: int
    failure_limit: int
    inconclusive_limit: int


def claimed_sources(analysis: Iterable[Mapping[str, Any]] | None) -> tuple[Source, ...]:
    """The templates an attempt's claim fixed (DeployerClaimed's `analysis`), as sources."""
    return tuple(
        Source(
            a["template"], int(a["count"]), int(a["interval"]), int(a["failure_limit"]), int(a["inconclusive_limit"])
        )
        for a in analysis or ()
    )


def tally_key(index: int, template: str | None) -> str:
    """The key of one source's outcomes in one rollout step (`Deployment.source_tallies`)."""
    return f"{index}:{template or ''}"


@dataclass(frozen=True)
class Sequence:
    """The steps of one attempt of a deployment, from its spec (and the templates its claim fixed)."""

    config: str
    revision: int
    attempt: int
    spec: Mapping[str, Any]
    analysis: tuple[Source, ...] = ()

    @property
    def sources(self) -> tuple[Source, ...]:
        """What each step's verification runs: --verify first, then each template, in order."""
        own: tuple[Source, ...] = ()
        if self.spec.get("verify"):
            own = (
                Source(
                    None,
                    int(self.spec.get("verify_count", 3)),
                    int(self.spec.get("verify_interval", 10)),
                    int(self.spec.get("failure_limit", 0)),
                    int(self.spec.get("inconclusive_limit", 0)),
                ),
            )
        return own + self.analysis

    @property
    def weights(self) -> list[int]:
        return list(self.spec.get("steps") or [100])

    @property
    def count(self) -> int:
        return len(self.weights)

    def hook(self, kind: str, try_: int = 1) -> Step | None:
        if not self.spec.get(f"{kind}_hook"):
            return None
        return Step(kind, try_, ids.hook_name(self.config, self.revision, kind, self.attempt, try_))

    def deployer(self, index: int = 1) -> Step:
        if self.spec.get("steps"):
            name = ids.step_deployer_name(self.config, self.revision, self.attempt, index)
        else:
            name = ids.deployer_name(self.config, self.revision, self.attempt)
        return Step(DEPLOYER, 1, name, index=index)

    def measurement(self, index: int, number: int, delay: int = 0, template: str | None = None) -> Step:
        name = ids.measurement_name(self.config, self.revision, self.attempt, number)
        return Step(VERIFY, number, name, index=index, delay=delay, template=template)

    def pause(self, index: int, why: str) -> Step:
        pause = self.spec.get("step_pause", 0)
        delay = None if why == INCONCLUSIVE or pause == "manual" else int(pause)
        return Step(
            PAUSE,
            1,
            ids.pause_name(self.config, self.revision, self.attempt, index, why == INCONCLUSIVE),
            index=index,
            delay=delay,
            why=why,
        )

    def first(self) -> Step:
        return self.hook(PRE) or self.deployer(1)

    def after_hook(self, kind: str) -> Step | None:
        """After a pre hook the first deployer; after a post hook nothing."""
        return self.deployer(1) if kind == PRE else None

    def after_deployer(self, index: int, measured: int, full: bool) -> Step | None:
        """After step `index`'s deployer exited 0: its first measurement, at once (none after --full)."""
        sources = self.sources
        if sources and not full:
            return self.measurement(index, measured + 1, template=sources[0].template)
        return self.after_verified(index, full)

    def after_verified(self, index: int, full: bool = False) -> Step | None:
        """After step `index` passed its verification: its pause, the next step, or the post hook."""
        if index < self.count and not full:
            return self.pause(index, STEP_PAUSE) if self.spec.get("step_pause", 0) != 0 else self.deployer(index + 1)
        if index < self.count:
            return self.deployer(self.count)
        return self.hook(POST)

    def after_pause(self, index: int, why: str) -> Step | None:
        """After a pause ended by its timer or `rollout promote`: an inconclusive one counts as passed."""
        return self.after_verified(index) if why == INCONCLUSIVE else self.deployer(index + 1)

    def after_measurement(
        self, index: int, number: int, tallies: Mapping[str, Mapping[str, int]], template: str | None = None
    ) -> tuple[Step | None, bool]:
        """After measurement `number` of step `index` (of source `template`), with each source's outcomes so
        far in `tallies` (by tally_key): the next step, and whether the verification has failed (then the
        deployment fails: no next step). One source past its failure limit fails the step at once; past its
        inconclusive limit, the step pauses for a human; else the next source still short of its count is
        measured (after its interval once it has been measured in this step), round the sources in turn."""
        sources = self.sources
        current = next((s for s in sources if s.template == template), None)
        mine = tallies.get(tally_key(index, template), {})
        if current is not None and mine.get(FAILED, 0) > current.failure_limit:
            return None, True
        if current is not None and mine.get(INCONCLUSIVE_OUTCOME, 0) > current.inconclusive_limit:
            return self.pause(index, INCONCLUSIVE), False
        at = sources.index(current) if current is not None else -1
        for source in sources[at + 1 :] + sources[: at + 1]:
            done = sum(tallies.get(tally_key(index, source.template), {}).get(o, 0) for o in OUTCOMES)
            if done < source.measurements:
                delay = source.interval if done else 0
                return self.measurement(index, number + 1, delay, source.template), False
        return self.after_verified(index), False

    def weight(self, index: int) -> int:
        return self.weights[min(max(index, 1), self.count) - 1]
