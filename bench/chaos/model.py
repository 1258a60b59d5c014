"""The chaos run's vocabulary (bench/chaos/run.py): its settings, profiles, and the records of ops, configs,
controllers and findings."""

from __future__ import annotations

import re
import shlex
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.shared.cli_server import Child  # bench/shared/cli_server.py: how commands start

REPO = Path(__file__).resolve().parents[2]
STEP_NAME = re.compile(
    r"^(?P<config>[a-z0-9-]+?)-(?P<version>\d+)-(?:deploy-\d+(?:-step-\d+)?|verify-\d+-\d+|(?:hook-pre|hook-post)-\d+(?:-\d+)?)$"
)
OPEN_PHASES = ("New", "Pending", "Running")
FAIL_VAR = {"deploy": "FAIL_DEPLOY", "pre": "FAIL_PRE", "post": "FAIL_POST"}
POLICIES = ("abort", "retry", "ignore")
OP_TIMEOUT = 600.0

# Weights of what the issuing loop does next (writes, reads and chaos in one seeded stream).
WEIGHTS = {
    "latest_supersede": 30,
    "latest": 18,
    "undo": 5,
    "config_set": 10,
    "cancel": 7,
    "retry": 8,
    "pause": 2,
    "resume": 5,
    "read": 3,
    "kill_controller": 2,
    "kill_shim": 3,
    "delete": 3,
    "rebuild": 1,
    "rebuild_shadow": 1,
    "corrupt_view": 2,
    "freeze": 5,
    "unfreeze": 4,
}
FREEZE_SECONDS = (5, 10, 20, None)  # a freeze's length (from its command's start); None: until an unfreeze
LIFTS = {"resume": "pause", "unfreeze": "freeze"}  # --scale: these lift what an earlier op set, if any is known
# --scale: as many of each kind of chaos per rollout, in a mix where most commands trigger one
# (many configs, so that few are refused for a rollout in progress), and shorter steps.
SCALE_WEIGHTS = {
    "latest_supersede": 55,
    "latest": 20,
    "undo": 4,
    "config_set": 8,
    "cancel": 3,
    "retry": 3,
    "pause": 1,
    "resume": 2,
    "read": 2,
    "kill_controller": 3,
    "kill_shim": 6,
    "delete": 6,
    "rebuild": 2,
    "rebuild_shadow": 2,
    "corrupt_view": 4,
    "freeze": 7,
    "unfreeze": 6,
}
# Progress points (fraction of the rollouts or of the time, whichever is further).
BACKUPS = (0.15, 0.55)  # small runs (< 100 rollouts) do the first backup and restore only
RESTORES = (0.4, 0.8)


@dataclass(frozen=True)
class Profile:
    """What a run is made of: the op mix, configs and commands at once, and how long steps sleep."""

    weights: dict[str, int]
    configs: int
    workers: int
    step_sleeps: tuple[float, ...]
    hook_sleeps: tuple[float, ...]
    freeze_seconds: tuple[float | None, ...]
    rollouts_per_restore: int | None  # a backup and a restore per this many rollouts; None: BACKUPS, RESTORES

    def restore_points(self, rollouts: int) -> tuple[list[float], list[float]]:
        """Where the projections are copied and put back (the first restore puts the log back with --restore-log)."""
        if self.rollouts_per_restore is None:
            pairs = len(BACKUPS) if rollouts >= 100 else 1
            return list(BACKUPS[:pairs]), list(RESTORES[:pairs])
        pairs = max(1, round(rollouts / self.rollouts_per_restore))
        return [(i + 0.3) / pairs for i in range(pairs)], [(i + 0.8) / pairs for i in range(pairs)]


DEFAULT = Profile(WEIGHTS, 3, 4, (0.1, 0.2, 0.3, 0.4, 0.5), (0.1, 0.2, 0.3), FREEZE_SECONDS, None)
SCALE = Profile(SCALE_WEIGHTS, 24, 4, (0.02, 0.05, 0.1, 0.2), (0.02, 0.05, 0.1), (2, 4, 8, None), 150)
# Every kind of chaos happens at least once, even in a tiny run: forced once past these points.
FORCED = {
    "kill_controller": 0.2,
    "kill_shim": 0.25,
    "delete": 0.3,
    "rebuild": 0.4,
    "rebuild_shadow": 0.45,
    "corrupt_view": 0.5,
    "freeze": 0.45,  # after the first restore: an old log copy put back forgets what came after it
}
# A write refused by a phase rule: the deployment it read was already terminal, so the
# refusal was decided on a torn read (DESIGN I4: decided again on fresh state, or exit 3).
STALE_REFUSAL = re.compile(r"^error: \w+ is not allowed in phase")
INTERNAL_ERROR = re.compile(r"^error: [A-Z]\w*(Error|Exception)\b")  # an exception the CLI did not expect
INLINE = ("kill_controller", "kill_shim", "corrupt_view")  # done by this process, at once
WRITES = (
    "queue",
    "latest",
    "latest_supersede",
    "undo",
    "config_set",
    "config_create",
    "cancel",
    "retry",
    "pause",
    "resume",
    "freeze",
    "unfreeze",
    "promote",
    "promote_full",
    "abort",
    "analysis_set",
)
# --steps: added to the profile's weights; fewer supersedes (a cancel calls for no rollback: let rollouts end).
STEP_WEIGHTS = {"promote": 4, "promote_full": 2, "abort": 2, "latest_supersede": 8, "latest": 40, "cancel": 2}
TEMPLATE_WEIGHTS = {"analysis_set": 4}  # --templates: edits of the analysis templates while rollouts run
EXPECTED_TYPE = {
    "queue": "RolloutTriggered",
    "latest": "RolloutTriggered",
    "latest_supersede": "RolloutTriggered",
    "undo": "RolloutTriggered",
    "cancel": "CancelRequested",
    "retry": "RetryRequested",
    "pause": "Paused",
    "resume": "Resumed",
    "config_create": "Registered",
    "freeze": "Frozen",
    "unfreeze": "Unfrozen",
    "promote": "Promoted",
    "promote_full": "Promoted",
    "abort": "AbortRequested",
}


# -- small helpers -----------------------------------------------------------------------------


def epoch(iso: str | None) -> float | None:
    return None if iso is None else datetime.fromisoformat(iso).timestamp()


def step_script(gt: Path, sleep: float, kind: str) -> str:
    out = shlex.quote(str(gt))
    return (
        f'echo "start $ROLLOUT_DEPLOYER $(date +%s.%N)" >> {out}; sleep {sleep}; '
        f'rc=${{{FAIL_VAR[kind]}:-0}}; echo "end $ROLLOUT_DEPLOYER $(date +%s.%N) $rc" >> {out}; exit $rc'
    )


def tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class Op:
    id: int
    kind: str
    config: str | None
    args: list[str]
    actor: str
    check_read: bool = False  # read the printed version back at once (read-your-writes)
    pick: float = 0.0  # seeded choice among what exists at run time (deployer to delete)
    rc: int | None = None
    out: str = ""
    err: str = ""
    revision: int | None = None
    updated: bool = False  # config set said "updated"
    read_back: bool | None = None
    t0: float = 0.0
    t1: float = 0.0


@dataclass
class Conf:
    name: str
    trigger: str
    latest_known: int = 0


@dataclass
class Controller:
    slot: int
    proc: subprocess.Popen[bytes] | Child | None = None
    log: Path | None = None
    generation: int = 0
    killed: bool = False
    down_until: float = 0.0


@dataclass
class Verdict:
    details: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))

    def add(self, what: str, item: Any) -> None:
        self.details[what].append(item)

    def count(self, what: str) -> int:
        return len(self.details.get(what, []))


class Interrupted(Exception):
    pass


# -- the run -----------------------------------------------------------------------------------
