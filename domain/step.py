"""Step: what an attempt runs or waits for now (its pre hook, a deployer step, a measurement, a pause, its
post hook: one try of it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PRE, DEPLOYER, VERIFY, PAUSE, POST = "pre", "deployer", "verify", "pause", "post"
# The kinds of step that may follow a finished hook, in order (those the spec has no hook for are skipped).
LATER = {PRE: (DEPLOYER, POST), DEPLOYER: (POST,), POST: ()}
# Kinds that run a process of their own (a pause runs nothing: it waits, for a time or for a human).
PROCESSES = frozenset({PRE, DEPLOYER, VERIFY, POST})
# Why a pause waits: a step's --step-pause, or measurements that were inconclusive too often.
STEP_PAUSE, INCONCLUSIVE = "step", "inconclusive"


@dataclass(frozen=True)
class Step:
    """A value: reports make a new one. Events carry it as a dict (`as_data`, `from_data`), as they
    always have: the log's payloads keep their shape (the fields of steps and verification are added
    only when they differ from their defaults).

    `index` is the rollout step (K of --steps) a deployer, measurement or pause belongs to; `delay` the
    seconds after the step became current before it is due (a measurement's interval, a pause's
    length), None for a pause that waits for `rollout promote`; `why` says why a pause waits.
    """

    kind: str  # PRE | DEPLOYER | VERIFY | PAUSE | POST
    try_: int  # 1 for a deployer; a hook's run, up to names.HOOK_TRIES; a measurement's number (K)
    name: str
    created: bool = False
    started: bool = False
    index: int = 1
    delay: int | None = 0
    why: str | None = None
    template: str | None = None  # the analysis template a measurement runs (None: the config's --verify)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Step:
        """The step an event names (a claim's `step`, a report's `next`), not yet created."""
        return cls(
            kind=data["kind"],
            try_=data["try"],
            name=data["name"],
            index=data.get("index", 1),
            delay=data.get("delay", 0),
            why=data.get("why"),
            template=data.get("template"),
        )

    def as_data(self) -> dict[str, Any]:
        """As events carry it: kind, try and name (whether it was created is recorded by other events)."""
        data: dict[str, Any] = {"kind": self.kind, "try": self.try_, "name": self.name}
        if self.index != 1:
            data["index"] = self.index
        if self.delay != 0:
            data["delay"] = self.delay
        if self.why is not None:
            data["why"] = self.why
        if self.template is not None:
            data["template"] = self.template
        return data

    @property
    def runs(self) -> bool:
        """Whether the step is a process (a pause is not)."""
        return self.kind in PROCESSES

    @property
    def waits_for_human(self) -> bool:
        return self.kind == PAUSE and self.delay is None


def data_of(step: Step | None) -> dict[str, Any] | None:
    return None if step is None else step.as_data()
