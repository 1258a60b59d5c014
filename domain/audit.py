"""What the log shows of I1-I3: a pure check over the events of a history, in log order."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rollouts.domain import phases

RANK = {phases.NEW: 0, phases.PENDING: 1, phases.RUNNING: 2, phases.COMPLETE: 3, phases.FAILED: 3}
CREATES = ("DeployerCreated", "HookCreated")


@dataclass(frozen=True)
class Violation:
    position: int
    config: str | None
    version: int | None
    rule: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


class Auditor:
    """Feed events in log order; `violations` lists every break of I1, I2 or I3 seen."""

    def __init__(self) -> None:
        self.phase: dict[tuple[str, int], str] = {}
        self.introduced: dict[str, int] = {}
        self.created: dict[str, int] = {}
        self.active: dict[str, set[int]] = {}
        self.violations: list[Violation] = []
        self.count = 0

    def feed(self, position: int, type_: str, config: str, version: int, data: dict[str, Any]) -> None:
        """One deployment event (config events carry no phase and are not fed)."""
        self.count += 1
        key = (config, version)
        before = self.phase.get(key)
        self._names(position, key, type_, data)
        if before is None and type_ != "Created":
            return
        if before is not None and type_ in phases.ALLOWED_FROM and before not in phases.ALLOWED_FROM[type_]:
            self._flag(position, key, "I3", f"{type_} happened in phase {before}")
        after = phases.phase_after(before, type_, data)
        if before and RANK[after] < RANK[before] and type_ != "RetryRequested":
            self._flag(position, key, "I3", f"phase went back from {before} to {after} by {type_}")
        self.phase[key] = after
        self._active(position, key, after)

    def _names(self, position: int, key: tuple[str, int], type_: str, data: dict[str, Any]) -> None:
        """I1: a deployer or hook name is scheduled once and created once, ever."""
        step = data.get("step") if type_ == "DeployerClaimed" else data.get("next")
        if step:
            self._once(self.introduced, step["name"], position, key, "claimed")
        if type_ in CREATES:
            self._once(self.created, data["name"], position, key, "created")

    def _once(self, seen: dict[str, int], name: str, position: int, key: tuple[str, int], what: str) -> None:
        if name in seen:
            self._flag(position, key, "I1", f"deployer {name} {what} twice (first at position {seen[name]})")
        else:
            seen[name] = position

    def _active(self, position: int, key: tuple[str, int], phase: str) -> None:
        """I2: at most one active deployment per config at every point of the log."""
        config, version = key
        active = self.active.setdefault(config, set())
        if phase in phases.ACTIVE:
            active.add(version)
        else:
            active.discard(version)
        if len(active) > 1:
            others = ", ".join(str(v) for v in sorted(active - {version}))
            self._flag(position, key, "I2", f"revision {version} active while revision {others} was active too")

    def _flag(self, position: int, key: tuple[str, int], rule: str, message: str) -> None:
        self.violations.append(Violation(position, key[0], key[1], rule, message))


def audit(events: Iterable[tuple[int, str, str, int, dict[str, Any]]]) -> Auditor:
    auditor = Auditor()
    for event in events:
        auditor.feed(*event)
    return auditor
