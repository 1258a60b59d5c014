"""A simulated runtime for the model test: the runtime port (as LocalRuntime), no processes.

Deployers never move by themselves: the test's rules start, exit, kill, delete
or lose them. The simulation keeps its own ground truth, independent of the
rows it serves: every create() call, which names it actually spawned (at most
once each, by construction, like LocalRuntime's insert-if-absent), and which
deployers are alive (created and not ended) per config.
"""

from __future__ import annotations

import contextlib
import pathlib
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from rollouts.adapters.runtime.port import DeployerExists, NoSuchDeployer, Observed

ACTIVE = ("created", "running")
STAMP = "2000-01-01T00:00:00.000000+00:00"  # rows are ordered by their sequence number, not by time


class SimCrash(Exception):
    """A process 'crashed' in the middle of what it was doing (raised by an armed fault)."""


@dataclass
class Row:
    name: str
    config: str
    revision: int
    attempt: int
    state: str
    seq: int
    spawned: bool  # True: created by create(); False: a tombstone with no process
    exit_code: int | None = None
    reason: str | None = None
    pruned: bool = False
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    claim: str | None = None

    def observed(self) -> Observed:
        ended = None if self.state in ACTIVE else STAMP
        return Observed(
            name=self.name,
            config=self.config,
            revision=self.revision,
            attempt=self.attempt,
            state=self.state,
            exit_code=self.exit_code,
            reason=self.reason,
            created_at=STAMP,
            ended_at=ended,
            pruned=self.pruned,
            claim=self.claim,
        )


class SimRuntime:
    """The runtime port on an in-memory table."""

    def __init__(self, logs: pathlib.Path) -> None:
        self.logs = logs
        self.rows: dict[str, Row] = {}
        self.create_calls: list[str] = []  # every create() call, refused ones included
        self.spawns: Counter[str] = Counter()  # names whose process was started (ground truth for I1)
        self.refused: list[str] = []  # create() calls answered with DeployerExists
        self.alive: dict[str, set[str]] = {}  # config -> names created and not ended (I2, runtime side)
        self.max_alive: dict[str, int] = {}
        self.beats = 0
        self.changes = 0  # bumped by every change of a row: a cheap "did anything happen?"
        # Armed faults: (when, callback), each fired once by the next create(), "before" the
        # insert-if-absent or "after" it (a crash, a twin controller, a user command in between).
        self.faults: list[tuple[str, Callable[[str, str], None]]] = []
        self.vet: Callable[[str], None] | None = None  # the test's check of every create() call
        self._seq = 0

    # -- the runtime port -------------------------------------------------------

    @property
    def folder(self) -> pathlib.Path:
        return self.logs.parent

    @property
    def database(self) -> pathlib.Path:
        return self.folder / "runtime.db"

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
        if not argv:
            raise ValueError("a deployer needs a command")
        self.log_path(name)
        if self.vet is not None:
            self.vet(name)
        self.create_calls.append(name)
        self._fire("before", name, config)
        if name in self.rows:
            self.refused.append(name)
            raise DeployerExists(name)
        self._seq += 1
        self.rows[name] = Row(
            name, config, revision, attempt, "created", self._seq, True, argv=argv, env=env, claim=claim
        )
        self.changes += 1
        self.spawns[name] += 1
        alive = self.alive.setdefault(config, set())
        alive.add(name)
        self.max_alive[config] = max(self.max_alive.get(config, 0), len(alive))
        self._fire("after", name, config)

    def batched(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # creates made one by one: a crash between them is modelled by faults

    def arm(self, when: str, callback: Callable[[str, str], None]) -> None:
        """Run `callback(name, config)` inside the next create(), before or after its insert."""
        assert when in ("before", "after"), when
        self.faults.append((when, callback))

    def _fire(self, when: str, name: str, config: str) -> None:
        while fault := next((f for f in self.faults if f[0] == when), None):
            self.faults.remove(fault)  # disarmed first: a nested create() does not fire it again
            fault[1](name, config)

    def tombstone(self, name: str, *, config: str, revision: int, attempt: int, reason: str) -> bool:
        self.log_path(name)
        if name in self.rows:
            return False
        self._seq += 1
        self.rows[name] = Row(name, config, revision, attempt, "stopped", self._seq, False, reason=reason)
        self.changes += 1
        return True

    def stop(self, name: str, *, reason: str, grace: float = 5.0) -> None:
        self._end(name, "stopped", reason, ACTIVE)

    def delete(self, name: str) -> None:
        self._end(name, "deleted", "deleted by user", ("created", "running", "exited", "stopped", "lost"))

    def get(self, name: str) -> Observed | None:
        row = self.rows.get(name)
        return row.observed() if row else None

    def born(self) -> str | None:
        return None  # the simulated table is never lost

    def list(self, *, include_pruned: bool = False, configs: Collection[str] | None = None) -> list[Observed]:
        rows = sorted(self.rows.values(), key=lambda r: r.seq)
        found = [r.observed() for r in rows if include_pruned or not r.pruned]
        return found if configs is None else [o for o in found if o.config in configs]

    def active(self) -> list[Observed]:
        return [o for o in self.list(include_pruned=True) if o.state in ACTIVE]

    def observe(self) -> list[Observed]:
        return self.active()

    def prune(self, names: list[str]) -> None:
        for name in names:
            row = self.rows.get(name)
            if row is not None and row.state not in ACTIVE:
                row.pruned = True
                self.changes += 1
                row.argv, row.env = [], {}

    def beat(self, at: float | None = None) -> None:
        self.beats += 1

    def log_path(self, name: str) -> pathlib.Path:
        if not name or "/" in name:
            raise ValueError(f"invalid deployer name: {name!r}")
        return self.logs / f"{name}.log"

    def data_version(self) -> int:
        return self.changes

    def start_fork_server(self) -> bool:
        return False

    def close(self) -> None:
        pass

    # -- what the test's rules do to deployers ---------------------------------

    def start(self, name: str) -> None:
        row = self.rows[name]
        assert row.state == "created", row
        row.state = "running"
        self.changes += 1

    def exit(self, name: str, code: int) -> None:
        self._end(name, "exited", None, ACTIVE, exit_code=code)

    def kill(self, name: str, signal: int) -> None:
        self._end(name, "exited", f"killed by signal {signal}", ACTIVE, exit_code=128 + signal)

    def vanish(self, name: str) -> None:
        self._end(name, "lost", "shim vanished", ACTIVE)

    def _end(
        self, name: str, state: str, reason: str | None, from_states: tuple[str, ...], exit_code: int | None = None
    ) -> None:
        row = self.rows.get(name)
        if row is None:
            raise NoSuchDeployer(name)
        if row.state not in from_states:
            return
        row.state, row.reason = state, reason
        self.changes += 1
        if exit_code is not None:
            row.exit_code = exit_code
        self.alive.get(row.config, set()).discard(name)

    # -- reading the ground truth -----------------------------------------------

    def names(self, *states: str) -> list[str]:
        return [r.name for r in sorted(self.rows.values(), key=lambda r: r.seq) if not states or r.state in states]
