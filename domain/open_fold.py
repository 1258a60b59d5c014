"""Which deployments a log leaves open (New, Pending or Running): a pure fold of its events in log order."""

from __future__ import annotations

from typing import Any

from . import phases

DEPLOYMENT = "deployment"  # the kind of a Deployment's events (projections.records.KINDS)


class OpenFold:
    """Feed events in log order; `open()` lists the deployments still open (New, Pending or Running: a seal
    is refused while any is), `left_open()` names them."""

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

    def left_open(self) -> list[tuple[str, int]]:
        """(config, revision) of each deployment New, Pending or Running, in the order they were created: a
        New one is claimed by the next controller of the log, wherever a copy of it runs."""
        return [self.named[s] for s, phase in self.phase.items() if phase in phases.OPEN and s in self.named]
