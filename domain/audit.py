"""What the log shows of I1-I3: a pure check over the events of a history, in log order."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import phases
from .phase_table import PhaseTable
from .phases import ALLOWED_FROM, phase_after

RANK = {phases.NEW: 0, phases.PENDING: 1, phases.RUNNING: 2, phases.COMPLETE: 3, phases.FAILED: 3}
CREATES = frozenset({"DeployerCreated", "HookCreated"})
_CREATED = 1 << 48  # a name's first creation's position, times this, beside its first claim's (Auditor.names)


@dataclass(frozen=True)
class Violation:
    """One break of rule `rule` ("I1", "G2", ...) found at `position`; `config` and `revision` where it is
    about one deployment, `view` where a view of the home differs from the log's fold (I5)."""

    position: int
    config: str | None
    revision: int | None
    rule: str
    message: str
    view: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """As `audit -o json` shows it (DESIGN 7 keeps the key `version` for a revision)."""
        shown: dict[str, Any] = {"position": self.position, "config": self.config, "version": self.revision}
        shown["rule"] = self.rule
        if self.view is not None:
            shown["view"] = self.view
        shown["message"] = self.message
        return shown


class Auditor:
    """Feed events in log order; `violations` lists every break of I1, I2 or I3 seen."""

    def __init__(self) -> None:
        self.phases = PhaseTable()  # every deployment's phase, ever: a later event of a finished one is I3's
        # Every deployer and hook name, ever (I1), with where it was first claimed and first created, as one
        # number: the claim's position + the creation's * _CREATED (a name, its dict entry and one int each).
        self.names: dict[str, int] = {}
        self.active: dict[str, set[int]] = {}
        self.violations: list[Violation] = []
        self.count = 0

    def feed(self, position: int, type_: str, config: str, revision: int, data: dict[str, Any]) -> str | None:
        """One deployment event (config events carry no phase and are not fed); the deployment's phase after
        it, None before its Created."""
        self.count += 1
        key = (config, revision)
        before = self.phases.get(config, revision)
        self._names(position, key, type_, data)
        if before is None and type_ != "Created":
            return None
        allowed = ALLOWED_FROM.get(type_)
        if before is not None and allowed is not None and before not in allowed:
            self._flag(position, key, "I3", f"{type_} happened in phase {before}")
        after = phase_after(before, type_, data)
        if before and RANK[after] < RANK[before] and type_ != "RetryRequested":
            self._flag(position, key, "I3", f"phase went back from {before} to {after} by {type_}")
        self.phases.set(config, revision, after)
        self._active(position, key, after)
        return after

    def _names(self, position: int, key: tuple[str, int], type_: str, data: dict[str, Any]) -> None:
        """I1: a deployer or hook name is scheduled once and created once, ever."""
        step = data.get("step") if type_ == "DeployerClaimed" else data.get("next")
        if step:
            self._once(step["name"], position, key, 1, "claimed")
        if type_ in CREATES:
            self._once(data["name"], position, key, _CREATED, "created")

    def _once(self, name: str, position: int, key: tuple[str, int], unit: int, what: str) -> None:
        names = self.names
        both = names.get(name, 0)
        first = both // unit % _CREATED  # this kind's first position; 0: none yet
        if first and first != position:
            self._flag(position, key, "I1", f"deployer {name} {what} twice (first at position {first})")
        elif not first and 0 < position < _CREATED:  # (a position past 2**48, in an edited log: not kept)
            names[name if both or type(name) is not str else sys.intern(name)] = both + position * unit

    def _active(self, position: int, key: tuple[str, int], phase: str) -> None:
        """I2: at most one active deployment per config at every point of the log."""
        config, revision = key
        active = self.active.get(config)
        if active is None:  # (not setdefault: a set made for every event)
            self.active[config] = active = set()
        if phase in phases.ACTIVE:
            active.add(revision)
        else:
            active.discard(revision)
        if len(active) > 1:
            others = ", ".join(str(v) for v in sorted(active - {revision}))
            self._flag(position, key, "I2", f"revision {revision} active while revision {others} was active too")

    def _flag(self, position: int, key: tuple[str, int], rule: str, message: str) -> None:
        self.violations.append(Violation(position, key[0], key[1], rule, message))


def audit(events: Iterable[tuple[int, str, str, int, dict[str, Any]]]) -> Auditor:
    auditor = Auditor()
    for event in events:
        auditor.feed(*event)
    return auditor
