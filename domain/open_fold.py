"""Which deployments a log leaves open (New, Pending or Running): a pure fold of its events in log order."""

from __future__ import annotations

from typing import Any

from . import phases

DEPLOYMENT = "deployment"  # the kind of a Deployment's events (projections.records.KINDS)


class OpenFold:
    """Feed events in log order; `open()` lists the deployments still open, `active()` those Pending or
    Running (a seal is refused while any is)."""

    def __init__(self) -> None:
        self.phase: dict[str, str] = {}  # deployment stream -> phase
        self.named: dict[str, tuple[str, int]] = {}  # deployment stream -> (config, revision)
        self.configs: dict[str, str] = {}  # deployment stream -> its config's stream id (hex)

    def feed(self, stream: str, kind: str, type_: str, data: dict[str, Any]) -> None:
        if kind != DEPLOYMENT:
            return
        if type_ == "Created":
            self.named[stream] = (data["config"], data["revision"])
            self.configs[stream] = data["config_id"]
        self.phase[stream] = phases.phase_after(self.phase.get(stream), type_, data)

    def open(self) -> list[str]:
        return [s for s, phase in self.phase.items() if phase in phases.OPEN]

    def active(self) -> list[tuple[str, int]]:
        """(config, revision) of each deployment Pending or Running, in the order they were created."""
        return [self.named[s] for s, phase in self.phase.items() if phase in phases.ACTIVE and s in self.named]
