"""Step: what an attempt runs now (its pre hook, its deployer or its post hook, one try of it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PRE, DEPLOYER, POST = "pre", "deployer", "post"
# The kinds of step that may follow a finished one, in order (those the spec has no hook for are skipped).
LATER = {PRE: (DEPLOYER, POST), DEPLOYER: (POST,), POST: ()}


@dataclass(frozen=True)
class Step:
    """A value: reports make a new one. Events carry it as a dict (`as_data`, `from_data`), as they
    always have: the log's payloads keep their shape."""

    kind: str  # PRE | DEPLOYER | POST
    try_: int  # 1 for a deployer; a hook's run, up to names.HOOK_TRIES
    name: str
    created: bool = False
    started: bool = False

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Step:
        """The step an event names (a claim's `step`, a report's `next`), not yet created."""
        return cls(kind=data["kind"], try_=data["try"], name=data["name"])

    def as_data(self) -> dict[str, Any]:
        """As events carry it: kind, try and name (whether it was created is recorded by other events)."""
        return {"kind": self.kind, "try": self.try_, "name": self.name}


def data_of(step: Step | None) -> dict[str, Any] | None:
    return None if step is None else step.as_data()
