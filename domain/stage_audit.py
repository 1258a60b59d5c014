"""What the log shows of I11 (DESIGN 7.10): a pure check over config and deployment events, in log order.

A deployment whose cause is a promotion of U revision N carries exactly N's artifact values (the keys of the
stage's policy), names the upstream its stage's policy names, and N was eligible (Complete, verified, soaked
for the stage's soak by the promotion's own timestamp, not an automatic rollback) when it was appended. An
automatic promotion (the controller's) takes a revision newer than any the stage was promoted from before
(so once each), and the newest one eligible then (a second of slack for the clock read before the event's
own timestamp). A promotion that never came is not a violation here: the log cannot tell it from one due
next pass (the chaos checks ask for it once the controllers are idle).
"""

from __future__ import annotations

from collections.abc import Container
from datetime import datetime, timedelta
from typing import Any

from .audit import Violation
from .stage import AUTOMATIC, StagePolicy, UpstreamFold, artifact_of, eligibility, policy_of, promoted_from

SLACK = timedelta(seconds=1)


class StageAuditor:
    """Feed every deployment event, and configs' Registered and SpecChanged, in log order.

    `upstreams`: every config a stage policy anywhere in the log names (audit_queries.upstreams), when the
    caller knows them: only their deployments are folded (a promotion reads no other), so the memory of a log
    without stages does not grow with its length. None: every deployment is folded."""

    def __init__(self, upstreams: Container[str] | None = None) -> None:
        self.upstreams = upstreams
        self.folds: dict[tuple[str, int], UpstreamFold] = {}
        self.policies: dict[str, StagePolicy | None] = {}
        self.promoted: dict[tuple[str, str], int] = {}  # (stage, upstream) -> the newest revision promoted
        self.latest: dict[str, int] = {}  # config -> its newest revision the log holds
        self.violations: list[Violation] = []

    def feed(self, position: int, type_: str, config: str, revision: int | None, at: str, data: dict[str, Any]) -> None:
        if revision is None:
            if type_ in ("Registered", "SpecChanged"):
                self.policies[config] = policy_of(data.get("spec") or {})
            return
        key = (config, revision)
        if type_ == "Created":
            if self.upstreams is None or config in self.upstreams:
                self.folds[key] = UpstreamFold(config, revision)
            self.latest[config] = max(revision, self.latest.get(config, 0))
            source = promoted_from(data.get("cause"))
            if source is not None:
                self._promotion(position, key, source, datetime.fromisoformat(at), data)
        fold = self.folds.get(key)
        if fold is not None:
            fold.feed(type_, datetime.fromisoformat(at), data)

    def _promotion(
        self, position: int, key: tuple[str, int], source: tuple[str, int], at: datetime, data: dict[str, Any]
    ) -> None:
        upstream, number = source
        policy = self.policies.get(key[0]) or policy_of(data.get("spec") or {})  # the config's, at that time
        if policy is None or policy.upstream != upstream:
            self._flag(position, key, f"promoted from {upstream}, which its stage does not take from")
            return
        fold = self.folds.get((upstream, number))
        if fold is None:
            self._flag(position, key, f"promoted from revision {number} of {upstream}, which the log does not hold")
            return
        verdict = eligibility(fold.found, policy, at)
        if not verdict.eligible:
            self._flag(position, key, f"promoted while not eligible: {verdict.why}")
        env = dict((data.get("spec") or {}).get("env") or {})
        if artifact_of(env, policy) != artifact_of(fold.found.env, policy):
            self._flag(position, key, f"carries another artifact than revision {number} of {upstream}")
        before = self.promoted.get((key[0], upstream), 0)
        if data.get("message") == AUTOMATIC:
            self._automatic(position, key, policy, number, before, at)
        self.promoted[key[0], upstream] = max(before, number)

    def _automatic(
        self, position: int, key: tuple[str, int], policy: StagePolicy, number: int, before: int, at: datetime
    ) -> None:
        if number <= before:
            self._flag(position, key, f"promoted revision {number} of {policy.upstream} again (after {before})")
        newer = [
            r
            for r in range(number + 1, self.latest.get(policy.upstream, 0) + 1)
            if (fold := self.folds.get((policy.upstream, r))) is not None
            and eligibility(fold.found, policy, at - SLACK).eligible
        ]
        if newer:
            self._flag(
                position,
                key,
                f"promoted revision {number} of {policy.upstream}, not the newest eligible ({max(newer)})",
            )

    def _flag(self, position: int, key: tuple[str, int], message: str) -> None:
        self.violations.append(Violation(position, key[0], key[1], "I11", message))
