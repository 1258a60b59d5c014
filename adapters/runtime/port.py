"""The runtime port: what the controller asks of a runtime, and the rows it reads back.

LocalRuntime implements it with processes and SQLite; the tests' runtimes implement it in memory.
Every call the controller makes on a runtime is here, so a double cannot drift from it unseen.
"""

from __future__ import annotations

import pathlib
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

UNKNOWN_CLAIM = "unknown"


def claim_text(log_id: str | None, position: int, digest: str | None) -> str:
    """How a runtime row names the claim it was made for (I7): the log's id, and the position and
    hash of the attempt's DeployerClaimed event."""
    return f"{log_id}:{position}:{digest or ''}"


def claim_parts(text: str | None) -> tuple[str, int, str] | None:
    """(log id, position, hash) of a row's claim; None for a row with none, or a disowned one."""
    log_id, _, rest = (text or "").partition(":")
    position, _, digest = rest.partition(":")
    return (log_id, int(position), digest) if position.isdigit() else None


@dataclass(frozen=True)
class Observed:
    """One row of the runtime table, as the controller sees it."""

    name: str
    config: str
    revision: int
    attempt: int
    state: str  # created | running | exited | stopped | deleted | lost
    exit_code: int | None  # a deployer killed by signal n has 128+n
    reason: str | None
    created_at: str
    ended_at: str | None
    pruned: bool
    # The claim it was created for: "LOG_ID:POSITION:HASH" of its DeployerClaimed event (I7); None on
    # rows made before claims were recorded, UNKNOWN_CLAIM once a rebind disowned those.
    claim: str | None = None


class DeployerExists(Exception):
    """create() of a name that ever existed, tombstones included."""


class NoSuchDeployer(Exception):
    """The name was never created."""


# Spelled before Runtime, whose own `list` shadows the builtin in its annotations.
Rows = list[Observed]
Names = list[str]


class Runtime(Protocol):
    """Deployers by name, each created at most once (DESIGN 5): the controller's only view of them."""

    @property
    def folder(self) -> pathlib.Path:
        """Where this host's controllers keep what belongs to the runtime (their twins' lock files)."""
        ...

    @property
    def database(self) -> pathlib.Path:
        """The file whose writes are changes to what the runtime reports (the controller watches it)."""
        ...

    def create(
        self,
        name: str,
        *,
        config: str,
        revision: int,
        attempt: int,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        pass_env: Sequence[str] = (),
        claim: str | None = None,
    ) -> None:
        """Insert-if-absent the row, then start it; DeployerExists for a name that ever existed."""
        ...

    def batched(self) -> AbstractContextManager[None]:
        """The creates made inside it are committed together (a runtime may simply make them one by one)."""
        ...

    def tombstone(self, name: str, *, config: str, revision: int, attempt: int, reason: str) -> bool:
        """Insert-if-absent a stopped row with no process; False when the name exists."""
        ...

    def get(self, name: str) -> Observed | None: ...

    def born(self) -> str | None:
        """When this runtime's table was made (ISO, UTC), if it knows: a claim older than that was made
        with a table it lost (runtime.db deleted or replaced), so what runs for it is unknown."""
        ...

    def list(self, *, include_pruned: bool = False, configs: Collection[str] | None = None) -> Rows:
        """Rows (unpruned ones unless `include_pruned`), of `configs` only if given."""
        ...

    def active(self) -> Rows:
        """Rows in state created or running."""
        ...

    def observe(self) -> Rows:
        """Mark lost what lost its supervision; active rows plus those that ended during the call."""
        ...

    def stop(self, name: str, *, reason: str, grace: float = 5.0) -> None: ...

    def delete(self, name: str) -> None:
        """What a user deleting a pod does; the row stays as a tombstone."""
        ...

    def prune(self, names: Names) -> None:
        """History limit: ended rows kept as tombstones, their logs gone."""
        ...

    def log_path(self, name: str) -> pathlib.Path: ...

    def beat(self, at: float | None = None) -> None:
        """The controller proves it is alive to its deployers' supervisors, as of `at` (a boot clock
        reading: when its lease was last renewed) or now."""
        ...

    def data_version(self) -> int:
        """A number that changes whenever another connection commits a change of a row."""
        ...

    def start_fork_server(self) -> bool:
        """Pay ahead of the first create what it would cost (False: nothing to start)."""
        ...

    def close(self) -> None: ...
