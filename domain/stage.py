"""Stages (DESIGN 7.10): a config that takes its artifact from an upstream config's verified revisions.

Pure: the policy a spec holds, an upstream revision folded from its own events, and whether it is
eligible at a clock reading the caller passes in (the log's clock: the time the command decides).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from . import phases
from .errors import UsageError
from .reasons import AUTO_ROLLBACK
from .sequence import FAILED, INCONCLUSIVE_OUTCOME

PROMOTION = "promotion of"  # the cause of a deployment a stage took from its upstream
AUTOMATIC = "promoted automatically"  # the message of a promotion the controller decided (an auto stage's)
# The spec's stage fields at their defaults: a spec without a stage stores none of them (its hash unchanged).
STAGE_DEFAULTS: dict[str, Any] = {"upstream": None, "artifact": None, "soak": 0, "promote": "manual"}
Promote = Literal["manual", "auto"]


class StageCycle(UsageError):
    """`--from` would make the stages a circle (the CLI exits 2)."""


class ArtifactKey(UsageError):
    """`--env` sets a key a stage takes from its upstream (the CLI exits 2)."""


@dataclass(frozen=True)
class StagePolicy:
    """Where a stage takes its artifact from (`upstream`), which env keys it is, how long an upstream
    revision soaks before it is eligible, and whether the controller promotes it by itself."""

    upstream: str
    artifact: tuple[str, ...]
    soak: int = 0
    promote: Promote = "manual"

    @property
    def auto(self) -> bool:
        return self.promote == "auto"


def policy_of(spec: Mapping[str, Any]) -> StagePolicy | None:
    """The stage policy a stored spec holds, or None for a config that is no stage."""
    upstream = spec.get("upstream")
    if not upstream:
        return None
    promote: Promote = "auto" if spec.get("promote") == "auto" else "manual"
    return StagePolicy(str(upstream), tuple(spec.get("artifact") or ()), int(spec.get("soak") or 0), promote)


# -- an upstream revision, folded from its events ---------------------------------------------------


@dataclass
class UpstreamRevision:
    """What a stage needs to know of one upstream revision: its phase and when it became Complete (by the
    event's timestamp), whether its verification passed (or a human promoted past it), and its artifact."""

    config: str
    revision: int
    phase: str = phases.NEW
    cause: str = ""
    env: dict[str, str] = field(default_factory=dict)
    completed_at: datetime | None = None
    verified: bool = False
    reason: str | None = None


_VERIFY_KEYS = ("verify", "verify_count", "failure_limit", "inconclusive_limit", "steps")  # what passed() reads


@dataclass
class _Verification:
    spec: dict[str, Any]
    tallies: dict[int, dict[str, int]] = field(default_factory=dict)
    promoted: set[int] = field(default_factory=set)
    full: int | None = None

    def passed(self) -> bool:
        """Each step's verification passed within the spec's limits, or needed none, or a human promoted past it."""
        if not self.spec.get("verify"):
            return True
        count = len(self.spec.get("steps") or [100])
        for step in range(1, count + 1):
            if step in self.promoted or (self.full is not None and step > self.full):
                continue
            tally = self.tallies.get(step, {})
            if (
                sum(tally.values()) < int(self.spec.get("verify_count", 3))
                or tally.get(FAILED, 0) > int(self.spec.get("failure_limit", 0))
                or tally.get(INCONCLUSIVE_OUTCOME, 0) > int(self.spec.get("inconclusive_limit", 0))
            ):
                return False
        return True


class UpstreamFold:
    """Folds one deployment's events, in order, into the UpstreamRevision a stage reads (`found`)."""

    def __init__(self, config: str, revision: int) -> None:
        self.found = UpstreamRevision(config, revision)
        self.check = _Verification({})

    def feed(self, type_: str, at: datetime, data: Mapping[str, Any]) -> None:
        found, check = self.found, self.check
        if type_ == "Created":
            spec = dict(data.get("spec") or {})
            found.cause, found.env = str(data.get("cause") or ""), dict(spec.get("env") or {})
            self.check = check = _Verification({k: spec[k] for k in _VERIFY_KEYS if k in spec})
        elif type_ == "RetryRequested":
            self.check = check = _Verification(check.spec)
        elif type_ == "MeasurementRecorded":
            tally = check.tallies.setdefault(int(data.get("step", 1)), {})
            outcome = str(data.get("outcome", INCONCLUSIVE_OUTCOME))
            tally[outcome] = tally.get(outcome, 0) + 1
        elif type_ == "Promoted":
            check.promoted.add(int(data.get("step", 1)))
            check.full = int(data.get("step", 1)) if data.get("full") else check.full
        before, found.phase = found.phase, phases.phase_after(found.phase, type_, dict(data))
        if found.phase == phases.COMPLETE and before != phases.COMPLETE:
            found.completed_at, found.verified = at, check.passed()
        elif found.phase != phases.COMPLETE:
            found.completed_at, found.verified = None, False
        if found.phase == phases.FAILED:
            found.reason = data.get("reason") or "cancelled"


def fold_upstream(
    config: str, revision: int, events: Iterable[tuple[str, datetime, Mapping[str, Any]]]
) -> UpstreamRevision:
    """An upstream revision from its deployment's events (type, timestamp, data), in order."""
    fold = UpstreamFold(config, revision)
    for type_, at, data in events:
        fold.feed(type_, at, data)
    return fold.found


# -- eligibility --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Eligibility:
    """Whether an upstream revision may be promoted now, and if not why (and, soaking, for how long more)."""

    revision: int
    eligible: bool
    why: str | None = None
    seconds_left: float | None = None  # soaking: how long until it is eligible


def eligibility(upstream: UpstreamRevision, policy: StagePolicy, now: datetime) -> Eligibility:
    """Eligible: Complete, its verification passed (or was promoted past), Complete for at least the stage's
    soak by `now`, not an automatic rollback (it restores an older artifact: promote that one), and it holds
    a value for every artifact key."""
    what = f"revision {upstream.revision} of {upstream.config}"
    if upstream.phase == phases.FAILED:
        return Eligibility(upstream.revision, False, f"{what} failed: {upstream.reason}")
    if upstream.phase != phases.COMPLETE or upstream.completed_at is None:
        return Eligibility(upstream.revision, False, f"{what} is {upstream.phase}, not Complete")
    if not upstream.verified:
        return Eligibility(upstream.revision, False, f"{what} is not verified")
    if upstream.cause.startswith(AUTO_ROLLBACK):
        return Eligibility(upstream.revision, False, f"{what} is an {upstream.cause}: promote that revision")
    missing = [k for k in policy.artifact if k not in upstream.env]
    if missing:
        return Eligibility(upstream.revision, False, f"{what} has no value for {missing[0]}")
    soaked = (now - upstream.completed_at).total_seconds()
    if soaked < policy.soak:
        left = policy.soak - soaked
        return Eligibility(upstream.revision, False, f"{what} is soaking for {left:.0f} more seconds", left)
    return Eligibility(upstream.revision, True)


def newest_eligible(
    load: Callable[[int], UpstreamRevision], latest: int, policy: StagePolicy, now: datetime, above: int = 0
) -> tuple[UpstreamRevision | None, Eligibility | None]:
    """The newest eligible upstream revision above `above` (looking from `latest` down), and the verdict on
    the newest revision looked at (why nothing is eligible, or the revision that soaks)."""
    first: Eligibility | None = None
    for revision in range(latest, above, -1):
        candidate = load(revision)
        verdict = eligibility(candidate, policy, now)
        if verdict.eligible:
            return candidate, first or verdict
        first = first or verdict
    return None, first


# -- what a promotion carries -----------------------------------------------------------------


def promotion_cause(upstream: str, revision: int) -> str:
    return f"{PROMOTION} {upstream} revision {revision}"


def promoted_from(cause: str | None) -> tuple[str, int] | None:
    """The upstream config and revision a deployment's cause names, for a promotion; else None."""
    if not cause or not cause.startswith(PROMOTION + " "):
        return None
    upstream, _, number = cause.removeprefix(PROMOTION + " ").rpartition(" revision ")
    return (upstream, int(number)) if upstream and number.isascii() and number.isdigit() else None


def artifact_of(env: Mapping[str, str], policy: StagePolicy) -> dict[str, str]:
    return {k: env[k] for k in policy.artifact if k in env}


def promoted_spec(spec: Mapping[str, Any], upstream: UpstreamRevision, policy: StagePolicy) -> dict[str, Any]:
    """The stage's spec with the artifact keys' values of `upstream` in its env."""
    env = {**dict(spec.get("env") or {}), **artifact_of(upstream.env, policy)}
    return {**spec, "env": env}


# -- rules of a stage's config --------------------------------------------------------------------


def check_env(policy: StagePolicy | None, keys: Iterable[str]) -> None:
    """Refuse `--env` of an artifact key on a stage: its value comes from the upstream only."""
    if policy is None:
        return
    taken = sorted(set(keys) & set(policy.artifact))
    if taken:
        raise ArtifactKey(
            f"{taken[0]} is an artifact key of this stage: it takes its value from {policy.upstream} (rollout latest)"
        )


def check_no_cycle(name: str, upstream: str | None, upstream_of: Callable[[str], str | None]) -> None:
    """Refuse a `--from` that leads back to `name` (a chain of any length is fine)."""
    seen = [name]
    current = upstream
    while current is not None:
        if current in seen:
            raise StageCycle(f"--from {upstream}: a cycle of stages ({' -> '.join([*seen, current])})")
        seen.append(current)
        current = upstream_of(current)


def pipeline(
    name: str, upstream_of: Callable[[str], str | None], downstream_of: Callable[[str], list[str]]
) -> list[str]:
    """The stages of the pipeline `name` belongs to, in order: from its first upstream down, each stage before
    the stages that take from it (a stage with several downstreams: all of them, breadth first)."""
    root, seen = name, {name}
    while (up := upstream_of(root)) is not None and up not in seen:
        seen.add(up)
        root = up
    ordered, queue = [], [root]
    while queue:
        current = queue.pop(0)
        if current in ordered:
            continue
        ordered.append(current)
        queue.extend(sorted(downstream_of(current)))
    return ordered
