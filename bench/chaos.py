#!/usr/bin/env python
"""A seeded, bounded chaos run of Rollouts with real processes on one temporary home (SQLite or PostgreSQL).

    python bench/chaos.py --seed 1 --configs 3 --rollouts 20 --controllers 2 --minutes 1
    python bench/chaos.py --seed 2 --store postgresql://postgres@127.0.0.1:5432/test   (the log in a fresh schema)
    python bench/chaos.py --seed 3 --scale --rollouts 2500 --minutes 40                (many rollouts: see below)

What runs, all as real processes against one home:

- K controllers (`controller run --interval 0.05 -q`), SIGKILLed at random and restarted;
- C configs, some with pre/post hooks of mixed policies, some with `--trigger config-change`,
  a short `--timeout` or a small `--history-limit`;
- concurrent CLI commands until R versions were triggered (or `--minutes` passed):
  `rollout latest [--supersede]`, `cancel`, `retry`, `undo`, `pause`/`resume`, `config set`
  (env, command, hooks, timeout; racing each other), and reads;
- chaos: SIGKILL of controllers and of deployer shims (found through the `shim_pid` of
  running rows of HOME/runtime/runtime.db, alive as adapters/runtime/procs.py says),
  `deployers delete` of running deployers, `projections rebuild` (plain and `--shadow`),
  restores of an old copy of HOME/projections (copied, then copied back later, each
  time with every controller and command stopped), and corrupt views: random bytes or zero
  length written in place over a file of HOME/projections (a view or the catalog) while
  controllers and commands run (a cache miss they must heal, never an error).

Every deployer and hook is `sh -c 'echo "start $ROLLOUT_DEPLOYER $(date +%s.%N)" >> GT;
sleep 0.X; echo "end $ROLLOUT_DEPLOYER ..." >> GT; exit ${FAIL_...:-0}'` with GT a file outside
the home: the ground truth. (`config set --env FAIL_DEPLOY=1` and the like make some fail.)

At the end chaos stops, one `controller run --until-idle` settles the home (after cancelling
what is still open if it does not settle alone), and the run checks:

- duplicates: deployer or hook names started more than once in GT;
- overlaps: two steps of one config alive at once (a step killed before its 'end' is alive
  until its runtime `ended_at`, or for ever);
- lost_writes: a version printed by a command missing from `rollout history`, a command
  that exited 0 with none of the events it stands for (found by its unique `--as` actor),
  or a printed version not visible to the very next read;
- audit_ok: `rollouts audit` exits 0;
- views_equal_rebuild: `events`, `rollout history` and `config list` (json) equal before and
  after `projections rebuild`, and after `projections rebuild --shadow`;
- and, as extra keys: phantom_writes (events of a refused command, versions nobody
  printed), unlogged_runs (a GT run no event names), orphans (steps still created/running
  after the settle), settled, controller_crashes (a controller that died by itself);
- completed_without_run: a deployment Complete in the log whose deployer (of the completing
  attempt) has no run in GT that started after that attempt's claim and finished (I7);
- with --restore-log, the first restore also puts back an old copy of the LOG (taken at the
  first backup point): every write and the controller must then refuse (exit 5;
  restore_not_refused counts those that did not), `home rebind` must succeed, and from then
  on the commands acknowledged after the copy are forgotten (that history is gone) and the
  GT runs they caused count only for duplicates and overlaps;
- claims_in_freeze: a DeployerClaimed event made while its config (or all) was frozen, by the
  Frozen/Unfrozen events before it and its own timestamp against --until (`freeze`/`unfreeze`
  ops of one config or of all, for 5-20 s or until an unfreeze, run among the others; the
  settle lifts them first); freezes: how many the log holds; late_freezes (reported only): a
  freeze refused (exit 2) because the command decided after its own --until;
- cli_errors, a violation: exit codes or errors outside the contract (a traceback, exit 5,
  "error: OperationalError: ..."); reported without failing the run: stale_refusals (a
  write refused by a phase rule; a torn read not decided again shows here, but so does a
  legitimate refusal, such as a retry of a deployment that is still running).

How commands start (`--cli`): by default each command, and each controller, is a child forked by
one warm interpreter (bench/cli_server.py) that runs the real entry point, `adapters.cli.main()`,
with its argv: a process of its own (pid, stdin from /dev/null, its own stdout and stderr, exit
code, SIGKILLed at a timeout or by the chaos), sharing only the interpreter's start-up and imports
(a SQLite `config list`: ~0.05 s of CPU forked, ~0.45 s as a fresh interpreter). `--cli spawn`
starts each as `python -m adapters.cli` as before. With the fork server, stderr ends with the CPU
seconds of the commands by command (controllers included; not the shims and deployers they start).

`--scale`, the profile for many rollouts: 24 configs (rollouts of different configs run side by
side; one config's steps never do), a mix of commands weighted to triggering (`latest --supersede`
mostly), `resume`/`unfreeze` aimed at a config known to be paused or frozen, steps and hooks that
sleep 0.02-0.2 s, freezes of 2-8 s, and a projections backup and restore per 150 rollouts. Each
kind of chaos comes about as often per rollout as in the default profile (per 300 rollouts, seen
here: 19-29 kills, 17-22 rebuilds, 8-21 corruptions, 24-33 freezes, 2 restores; by default: 24-37,
20, 15-19, 31-41, 2); every check is the same. Here (2 busy cores) a 300-rollout run takes ~1.5
min on SQLite and ~2.5 on PostgreSQL, a 1,000-rollout one ~4.5 min on SQLite.

The last line of stdout is one JSON object; the exit status is 1 on any violation. Every
process started here is stopped on exit, Ctrl-C and SIGTERM included. The temporary
directory is removed on success and kept (its path printed on stderr) otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import resource
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.runtime.procs import is_alive, signal_group

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chaos_notify  # noqa: E402 - bench/chaos_notify.py: the notification sink of the run
from cli_server import Child, ForkedCli, FreshCli  # noqa: E402 - bench/cli_server.py: how commands start

REPO = Path(__file__).resolve().parents[1]
STEP_NAME = re.compile(r"^(?P<config>[a-z0-9-]+?)-(?P<version>\d+)-(?:deploy|hook-pre|hook-post)-\d+(?:-\d+)?$")
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
)
EXPECTED_TYPE = {
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
}


# -- small helpers -----------------------------------------------------------------------------


def epoch(iso: str | None) -> float | None:
    return None if iso is None else datetime.fromisoformat(iso).timestamp()


def step_script(gt: Path, sleep: float, kind: str) -> str:
    out = shlex.quote(str(gt))
    return (
        f'echo "start $ROLLOUT_DEPLOYER $(date +%s.%N)" >> {out}; sleep {sleep}; '
        f'echo "end $ROLLOUT_DEPLOYER $(date +%s.%N)" >> {out}; exit ${{{FAIL_VAR[kind]}:-0}}'
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
    version: int | None = None
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


class Chaos:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.profile = SCALE if args.scale else DEFAULT
        self.configs_count: int = args.configs or self.profile.configs
        self.workers: int = args.workers or self.profile.workers
        self.tmp = Path(tempfile.mkdtemp(prefix=f"rollouts-chaos-{args.seed}-"))
        self.home = self.tmp / "home"
        self.gt = self.tmp / "ground-truth"
        self.work = self.tmp / "work"
        self.logs = self.tmp / "logs"
        self.backup = self.tmp / "projections-backup"
        self.log_backup = self.tmp / "events-backup.db"
        self.log_mark: dict[str, Any] | None = None  # where the log copy was taken: ops, GT lines, versions
        self.gone_runs: tuple[int, int] | None = None  # GT lines [from, to) of the history a log restore dropped
        self.verdict = Verdict()
        for folder in (self.work, self.logs):
            folder.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROLLOUTS_")}
        env["ROLLOUTS_HOME"] = str(self.home)
        env.update(chaos_notify.ENV)
        self.sink = chaos_notify.start()
        self.sink_restored_at: int | None = None  # requests the sink had when the old log came back
        self.schema: str | None = None  # with --store: the run's own PostgreSQL schema, dropped at the end
        if args.store:
            self.schema = f"chaos_{args.seed}_{uuid.uuid4().hex[:8]}"
            env["ROLLOUTS_STORE"] = f"{args.store}{'&' if '?' in args.store else '?'}schema={self.schema}"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        self.env = env
        self.lock = threading.Lock()
        self.commands: ForkedCli | FreshCli | None = None  # started by run()
        self.ops: list[Op] = []
        self.op_ids = 0
        self.versions = 0  # versions printed by commands (triggered rollouts)
        self.counts: Counter[str] = Counter()
        self.stopping = False
        self.configs: list[Conf] = []
        self.held: dict[str, set[str]] = {"pause": set(), "freeze": set()}  # configs paused, frozen (as far as known)
        self.controllers = [Controller(i) for i in range(args.controllers)]
        self.journal = open(self.tmp / "ops.jsonl", "w")  # noqa: SIM115 - closed in cleanup()
        self.started = time.monotonic()
        self.issue_start = self.started
        self.keep = True

    # -- processes -----------------------------------------------------------

    def cli(
        self, args: list[str], actor: str | None = None, timeout: float = OP_TIMEOUT
    ) -> tuple[int | None, str, str]:
        """Run `rollouts ARGS` to its end; (None, ...) if it had to be killed."""
        if self.stopping:
            raise Interrupted
        assert self.commands is not None
        rc, out, err, _ = self.commands.run([*(["--as", actor] if actor else []), *args], timeout)
        return rc, out, err

    def json_of(self, args: list[str]) -> Any:
        rc, out, err = self.cli([*args, "-o", "json"], timeout=900)
        if rc != 0:
            raise RuntimeError(f"rollouts {' '.join(args)} exited {rc}: {err.strip()[-500:]}")
        return json.loads(out)

    def start_controller(self, c: Controller) -> None:
        c.generation += 1
        c.log = self.logs / f"controller-{c.slot}-{c.generation}.log"
        actor = f"chaos-controller-{c.slot}"
        argv = ["--as", actor, "controller", "run", "--interval", "0.05", "-q"]
        with open(c.log, "wb") as log:
            assert self.commands is not None
            c.proc = self.commands.spawn(argv, log.fileno(), log.fileno())
        c.killed = False

    def kill_controller(self, c: Controller, *, delay: float) -> bool:
        if c.proc is None or c.proc.poll() is not None:
            return False
        c.killed = True
        c.proc.send_signal(signal.SIGKILL)
        c.proc.wait()
        c.proc = None
        c.down_until = time.monotonic() + delay
        self.counts["controller_kills"] += 1
        return True

    def maintain_controllers(self, verdict: Verdict) -> None:
        """Restart controllers that were killed (after their delay) or that died by themselves."""
        now = time.monotonic()
        for c in self.controllers:
            if c.proc is not None and c.proc.poll() is not None:
                verdict.add(
                    "controller_crashes",
                    {"slot": c.slot, "generation": c.generation, "rc": c.proc.returncode, "log": tail(c.log)},  # type: ignore[arg-type]
                )
                c.proc = None
            if c.proc is None and now >= c.down_until:
                self.start_controller(c)

    def stop_controllers(self, *, kill: bool) -> None:
        for c in self.controllers:
            if c.proc is None:
                continue
            if kill:
                self.kill_controller(c, delay=0)
                continue
            c.proc.send_signal(signal.SIGTERM)
        for c in self.controllers:
            if c.proc is None:
                continue
            try:
                c.proc.wait(30)
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait()
            c.proc = None

    def runtime_rows(self, where: str = "") -> list[sqlite3.Row]:
        db_path = self.home / "runtime" / "runtime.db"
        if not db_path.exists():
            return []
        try:
            db = sqlite3.connect(db_path, timeout=30)
        except sqlite3.Error:
            return []
        try:
            db.row_factory = sqlite3.Row
            return db.execute(f"SELECT * FROM deployers {where} ORDER BY name").fetchall()
        except sqlite3.Error:
            return []
        finally:
            db.close()

    def kill_shim(self, pick: float) -> bool:
        rows = [
            r
            for r in self.runtime_rows("WHERE state IN ('created', 'running') AND shim_pid IS NOT NULL")
            if is_alive(r["shim_pid"], r["shim_start"])
        ]
        if not rows:
            return False
        row = rows[int(pick * len(rows))]
        if not is_alive(row["shim_pid"], row["shim_start"]):  # verified again just before the kill
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(row["shim_pid"], signal.SIGKILL)
            self.counts["shim_kills"] += 1
            self.log(f"SIGKILL shim {row['shim_pid']} of {row['name']}")
            return True
        return False

    def corrupt_view(self, pick: float) -> bool:
        """Random bytes or zero length in place over a projection file (a view or the catalog)."""
        files = sorted((self.home / "projections").glob("*.db"))
        if not files:
            return False
        path = files[int(pick * len(files))]
        how = "zero length" if self.rng.random() < 0.5 else "random bytes"
        try:
            with open(path, "r+b") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(0)
                if how == "zero length":
                    f.truncate(0)
                else:
                    f.write(self.rng.randbytes(max(size, 4096)))
        except FileNotFoundError:  # swapped out by a rebuild meanwhile
            return False
        self.counts["corruptions"] += 1
        self.log(f"{how} over {path.name}")
        return True

    def cleanup(self) -> None:
        """Stop everything this run started: commands, controllers, shims, deployer groups."""
        self.stopping = True
        for c in self.controllers:
            if c.proc is not None and c.proc.poll() is None:
                c.proc.kill()
                with contextlib.suppress(RuntimeError):  # (the fork server died: its children are gone with it)
                    c.proc.wait()
        if self.commands is not None:
            self.commands.close()  # kills the commands still running
        for row in self.runtime_rows("WHERE shim_pid IS NOT NULL OR pgid IS NOT NULL"):
            if is_alive(row["shim_pid"], row["shim_start"]):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(row["shim_pid"], signal.SIGKILL)
            if row["pgid"] is not None and is_alive(row["pgid"], row["start_time"]):
                with contextlib.suppress(PermissionError):
                    signal_group(row["pgid"], signal.SIGKILL)
        with self.lock, contextlib.suppress(Exception):
            self.journal.close()
        with contextlib.suppress(Exception):
            self.sink.__exit__()
        if self.schema and not self.keep:
            drop_schema(self.args.store, self.schema)

    def record(self, op: Op) -> None:
        """Append the op to ops.jsonl (the evidence kept when a run fails)."""
        with self.lock, contextlib.suppress(ValueError):  # closed by cleanup(): nothing to keep
            self.journal.write(json.dumps(asdict(op)) + "\n")

    def log(self, text: str) -> None:
        if self.args.verbose:
            print(f"[{time.monotonic() - self.started:7.1f}s] {text}", file=sys.stderr, flush=True)

    # -- setup ---------------------------------------------------------------

    def setup(self) -> None:
        rng = self.rng
        rc, _, err = self.cli(chaos_notify.add_argv(self.sink), actor="chaos-notify")
        if rc != 0:
            raise RuntimeError(f"notify add failed: {rc} {err.strip()}")
        create_ops = []
        for i in range(self.configs_count):
            name = f"chaos-{i}"
            trigger = "config-change" if rng.random() < 0.25 else "manual"
            args = ["config", "create", name, "--trigger", trigger, "--env", "NOISE=0"]
            if rng.random() < 0.2:
                args += ["--timeout", "3"]
            if rng.random() < 0.3:
                args += ["--history-limit", "2"]
            for which in ("pre", "post"):
                if rng.random() < 0.4:
                    args += [f"--{which}-hook", self.hook(which), f"--{which}-hook-policy", rng.choice(POLICIES)]
            args += ["--", "sh", "-c", step_script(self.gt, self.sleep(), "deploy")]
            self.configs.append(Conf(name, trigger))
            create_ops.append(self.new_op("config_create", name, args))
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(self.run_op, create_ops))
        failed = [op for op in create_ops if op.rc != 0]
        if failed:
            raise RuntimeError(f"config create failed: {failed[0].rc} {failed[0].err.strip()}")

    def sleep(self) -> float:
        return self.rng.choice(self.profile.step_sleeps)

    def hook(self, which: str) -> str:
        return shlex.join(["sh", "-c", step_script(self.gt, self.rng.choice(self.profile.hook_sleeps), which)])

    # -- issuing -------------------------------------------------------------

    def new_op(self, kind: str, config: str | None, args: list[str], **extra: Any) -> Op:
        self.op_ids += 1
        op = Op(self.op_ids, kind, config, args, actor=f"chaos-op-{self.op_ids}", **extra)
        self.ops.append(op)
        return op

    def draw(self, kind: str | None = None) -> Op:
        """The next command, every choice from the seeded generator."""
        rng = self.rng
        weights = self.profile.weights
        kind = kind or rng.choices(list(weights), list(weights.values()))[0]
        conf = rng.choice(self.configs)
        name = conf.name
        pick = rng.random()
        check_read = rng.random() < 0.25
        if self.args.scale and kind in LIFTS:  # of 24 configs, one at random is seldom the one paused or frozen
            with self.lock:
                held = sorted(self.held[LIFTS[kind]])
            name = held[int(pick * len(held))] if held else name
        if kind in ("latest", "latest_supersede"):
            args = ["rollout", "latest", name, "--reason", f"chaos {self.op_ids + 1}"]
            args += ["--supersede"] if kind == "latest_supersede" else []
        elif kind == "undo":
            args = ["rollout", "undo", name]
            if conf.latest_known and rng.random() < 0.5:
                args += ["--to-revision", str(rng.randint(1, conf.latest_known))]
        elif kind == "config_set":
            args = ["config", "set", name, *self.spec_change()]
        elif kind in ("cancel", "retry", "pause", "resume"):
            args = ["rollout", kind, name]
        elif kind == "read":
            args = rng.choice(
                (
                    ["rollout", "status", name],
                    ["rollout", "history", name, "-o", "json"],
                    ["events", name, "--type", "DeployerCreated", "-o", "json"],
                    ["projections", "status"],
                    ["deployers", "list"],
                )
            )
        elif kind in ("rebuild", "rebuild_shadow"):
            args = ["projections", "rebuild", *(["--shadow"] if kind == "rebuild_shadow" else [])]
        elif kind in ("freeze", "unfreeze"):  # of one config, or (rarely) of all; a freeze's --until is set at run time
            args = [kind, *(["--all"] if rng.random() < 0.15 else [name])]
            if kind == "freeze":
                args += ["--reason", f"chaos {self.op_ids + 1}"]
        else:  # kill_controller, kill_shim, delete, corrupt_view: what to hit is chosen at run time with `pick`
            args = []
        return self.new_op(kind, name, args, check_read=check_read, pick=pick)

    def spec_change(self) -> list[str]:
        rng = self.rng
        v = rng.random()
        if v < 0.3:
            return ["--env", f"NOISE={rng.randrange(1_000_000)}"]
        if v < 0.45:
            return ["--env", f"{rng.choice(list(FAIL_VAR.values()))}={1 if rng.random() < 0.25 else 0}"]
        if v < 0.65:
            return ["--", "sh", "-c", step_script(self.gt, self.sleep(), "deploy")]
        if v < 0.8:
            which = rng.choice(("pre", "post"))
            if rng.random() < 0.3:
                return [f"--{which}-hook", ""]
            return [f"--{which}-hook", self.hook(which), f"--{which}-hook-policy", rng.choice(POLICIES)]
        if v < 0.9:
            return ["--timeout", str(rng.choice((3, 5, 120)))]
        return ["--env", "NOISE-"]

    def run_op(self, op: Op) -> Op:
        op.t0 = time.time()
        try:
            if op.kind == "delete":
                rows = self.runtime_rows("WHERE state = 'running'")
                if not rows:
                    op.rc = None
                    return op
                target = rows[int(op.pick * len(rows))]["name"]
                op.args = ["deployers", "delete", target]
            if op.kind == "freeze":
                lengths = self.profile.freeze_seconds
                seconds = lengths[int(op.pick * len(lengths))]
                if seconds is not None:
                    op.args = [*op.args, "--until", datetime.fromtimestamp(time.time() + seconds, UTC).isoformat()]
            op.rc, op.out, op.err = self.cli(op.args, actor=op.actor)
            self.note(op)
            if op.version is not None and op.check_read:
                argv = ["rollout", "history", op.config, "--revision", str(op.version), "-o", "json"]
                rc, out, err = self.cli(argv)  # type: ignore[list-item]
                op.read_back = rc == 0 and any(r.get("version") == op.version for r in json.loads(out or "[]"))
                if not op.read_back:
                    op.err += f"\nread back: exit {rc}: {err.strip()[-300:]}"
        except Interrupted:
            pass
        finally:
            op.t1 = time.time()
            self.record(op)
        return op

    def note(self, op: Op) -> None:
        """Read what a command printed: the version it triggered, whether it changed the spec."""
        if op.rc != 0:
            return
        out = op.out.strip()
        if op.kind in ("latest", "latest_supersede") and out.isdigit():
            op.version = int(out)
        elif op.kind == "undo":
            m = re.search(r"as version (\d+)", out)
            op.version = int(m[1]) if m else None
        elif op.kind in ("config_set", "config_create"):
            op.updated = " updated" in out or op.kind == "config_create"
            m = re.search(r"version (\d+) triggered", out)
            op.version = int(m[1]) if m else None
        elif op.kind == "delete":
            self.counts["deletes"] += 1
        elif op.kind in ("rebuild", "rebuild_shadow"):
            self.counts[op.kind] += 1
        elif op.kind == "freeze":
            self.counts["freeze_kept"] += 1  # (set back to 0 by a log restore)
        if op.kind in ("pause", "freeze") and "--all" not in op.args:
            with self.lock:
                self.held[op.kind].add(op.config)  # type: ignore[arg-type]
        elif op.kind in LIFTS and "--all" not in op.args:
            with self.lock:
                self.held[LIFTS[op.kind]].discard(op.config)  # type: ignore[arg-type]
        if op.version is not None:
            with self.lock:
                self.versions += 1
                for conf in self.configs:
                    if conf.name == op.config:
                        conf.latest_known = max(conf.latest_known, op.version)

    # -- stop the world: projection backups and restores ---------------------

    def quiesce(self, inflight: set[Future[Op]]) -> None:
        wait(inflight)
        inflight.clear()
        self.stop_controllers(kill=True)

    def take_backup(self) -> None:
        shutil.rmtree(self.backup, ignore_errors=True)
        shutil.copytree(self.home / "projections", self.backup)
        self.counts["backups"] += 1
        self.log(f"projections copied to {self.backup}")
        if self.args.restore_log and self.log_mark is None:
            with (
                contextlib.closing(sqlite3.connect(self.home / "events.db")) as source,
                contextlib.closing(sqlite3.connect(self.log_backup)) as target,
            ):
                source.backup(target)
            latest = {c.name: c.latest_known for c in self.configs}
            self.log_mark = {"ops": len(self.ops), "gt": self.gt_lines(), "latest": latest}
            self.log("log copied")

    def gt_lines(self) -> int:
        return len(self.gt.read_text().splitlines()) if self.gt.exists() else 0

    def restore_log(self) -> None:
        """Put the old copy of the log back: refused until `home rebind`, then that history is gone."""
        assert self.log_mark is not None
        # Through SQLite's backup API, as an operator restoring a live WAL database must: copying the
        # file over it races the WAL of any connection still open (its checkpoint brings the old pages back).
        with (
            contextlib.closing(sqlite3.connect(self.log_backup)) as source,
            contextlib.closing(sqlite3.connect(self.home / "events.db")) as target,
        ):
            source.backup(target)
        self.sink_restored_at = chaos_notify.received_count(self.sink)
        self.counts["log_restores"] += 1
        self.counts["freeze_kept"] = 0  # the freezes issued since the copy are gone with it
        for args in (["rollout", "latest", self.configs[0].name], ["controller", "run", "--once", "-q"]):
            rc, _, err = self.cli(args, actor="chaos-after-restore")
            if rc != 5:
                self.verdict.add("restore_not_refused", {"args": args, "rc": rc, "err": err.strip()[-300:]})
        rc, out, err = self.cli(["home", "rebind"], actor="chaos-rebind")
        if rc != 0:
            self.verdict.add("rebind", {"rc": rc, "err": err.strip()[-300:]})
        self.gone_runs = (self.log_mark["gt"], self.gt_lines())
        self.ops = self.ops[: self.log_mark["ops"]]
        for conf in self.configs:
            conf.latest_known = self.log_mark["latest"].get(conf.name, 0)
        self.log(f"old log copied back and the home rebound: {out.strip()}")

    def restore_backup(self) -> None:
        if self.log_mark is not None and not self.counts["log_restores"]:
            self.restore_log()
            return
        folder = self.home / "projections"
        for path in folder.iterdir():
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        for path in self.backup.iterdir():
            shutil.copy2(path, folder / path.name)
        self.counts["restores"] += 1
        self.log("old projections copied back")

    # -- main loop -----------------------------------------------------------

    def progress(self) -> float:
        by_count = self.versions / max(1, self.args.rollouts)
        by_time = (time.monotonic() - self.issue_start) / (self.args.minutes * 60)
        return max(by_count, by_time)

    def chaos_inline(self, op: Op) -> None:
        if op.kind == "kill_controller":
            c = self.controllers[int(op.pick * len(self.controllers))]
            if self.kill_controller(c, delay=op.pick * 1.0):
                self.log(f"SIGKILL controller {c.slot}")
                op.rc = 0
        elif op.kind == "kill_shim":
            op.rc = 0 if self.kill_shim(op.pick) else None
        elif op.kind == "corrupt_view":
            op.rc = 0 if self.corrupt_view(op.pick) else None
        self.record(op)

    def issue(self, verdict: Verdict) -> None:
        self.issue_start = time.monotonic()
        deadline = self.issue_start + self.args.minutes * 60
        backups, restores = self.profile.restore_points(self.args.rollouts)
        forced = dict(FORCED)
        inflight: set[Future[Op]] = set()
        last_report = time.monotonic()
        with ThreadPoolExecutor(self.workers) as pool:
            try:
                while self.versions < self.args.rollouts and time.monotonic() < deadline:
                    self.maintain_controllers(verdict)
                    progress = self.progress()
                    if backups and progress >= backups[0]:
                        backups.pop(0)
                        self.quiesce(inflight)
                        self.take_backup()
                        continue
                    if restores and progress >= restores[0] and self.backup.exists():
                        restores.pop(0)
                        self.quiesce(inflight)
                        self.restore_backup()
                        continue
                    done = {f for f in inflight if f.done()}
                    for f in done:
                        f.result()
                    inflight -= done
                    if len(inflight) >= self.workers:
                        wait(inflight, timeout=0.05, return_when=FIRST_COMPLETED)
                        continue
                    due = [k for k, at in forced.items() if progress >= at and not self.did(k) and self.can(k)]
                    op = self.draw(due[0] if due else None)
                    if due and op.kind == "freeze":
                        op.pick = 0.999  # the forced freeze lasts until lifted: no --until a slow command could pass
                    if due and op.kind not in INLINE:
                        forced.pop(op.kind)  # issued once; its count shows only when it is done
                    if op.kind in INLINE:
                        self.chaos_inline(op)
                    else:
                        inflight.add(pool.submit(self.run_op, op))
                    if time.monotonic() - last_report > 15:
                        last_report = time.monotonic()
                        self.report_progress()
                wait(inflight)
                for f in inflight:
                    f.result()
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                self.cleanup()  # kill running commands now rather than wait for them
                raise

    def can(self, kind: str) -> bool:
        """Whether a forced chaos action has something to act on now (a running deployer)."""
        return kind not in ("kill_shim", "delete") or bool(self.runtime_rows("WHERE state = 'running'"))

    def did(self, kind: str) -> bool:
        return {
            "kill_controller": self.counts["controller_kills"],
            "kill_shim": self.counts["shim_kills"],
            "delete": self.counts["deletes"],
            "rebuild": self.counts["rebuild"],
            "rebuild_shadow": self.counts["rebuild_shadow"],
            "corrupt_view": self.counts["corruptions"],
            "freeze": self.counts["freeze_kept"],
        }[kind] > 0

    def report_progress(self) -> None:
        elapsed = time.monotonic() - self.started
        codes = Counter(op.rc for op in self.ops if op.kind in WRITES)
        print(
            f"[{elapsed:6.0f}s] versions {self.versions}/{self.args.rollouts}, ops {len(self.ops)}, "
            f"exits {dict(codes)}, {dict(self.counts)}",
            file=sys.stderr,
            flush=True,
        )

    # -- settling ------------------------------------------------------------

    def lift_freezes(self) -> None:
        """Before the settle: every freeze in force lifted, timed ones included (a refusal: there was none)."""
        for target in [["--all"], *([c.name] for c in self.configs)]:
            self.cli(["unfreeze", *target], actor="chaos-settle")

    def settle(self, verdict: Verdict) -> bool:
        self.stop_controllers(kill=False)
        self.lift_freezes()
        argv = ["controller", "run", "--until-idle", "--interval", "0.05", "--timeout", "120", "-q"]
        rc, _, err = self.cli(argv, actor="chaos-settle")
        if rc == 0:
            return True
        verdict.add("settle", f"first until-idle exited {rc}: {err.strip()[-300:]}")
        for conf in self.configs:
            op = self.new_op("cancel", conf.name, ["rollout", "cancel", conf.name])
            self.run_op(op)
        rc, _, err = self.cli(argv, actor="chaos-settle")
        if rc != 0:
            verdict.add("settle", f"second until-idle exited {rc}: {err.strip()[-300:]}")
        return rc == 0

    # -- checking ------------------------------------------------------------

    def views(self) -> dict[str, Any]:
        """The read models as the CLI serves them (several readers at once: faster, and a race)."""
        with ThreadPoolExecutor(4) as pool:
            events = pool.submit(self.json_of, ["events"])
            configs = pool.submit(self.json_of, ["config", "list"])
            history = {c.name: pool.submit(self.json_of, ["rollout", "history", c.name]) for c in self.configs}
            return {
                "events": events.result(),
                "configs": configs.result(),
                "history": {name: f.result() for name, f in history.items()},
            }

    def check(self, verdict: Verdict) -> dict[str, Any]:
        deployers = self.json_of(["deployers", "list", "--all"])
        for row in deployers:
            if row["state"] in ("created", "running"):
                verdict.add("orphans", row)
        live = self.views()
        self.check_ground_truth(verdict, deployers, live["events"], live["history"])
        self.check_writes(verdict, live)
        self.check_freezes(verdict, live["events"])
        rc, out, err = self.cli(["audit", "-o", "json"], timeout=900)
        audit_ok = rc == 0
        if not audit_ok:
            verdict.add("audit", out[-2000:] or err[-500:])
        equal = True
        for flags in ([], ["--shadow"]):
            rc, _, err = self.cli(["projections", "rebuild", *flags], timeout=900)
            if rc != 0:
                verdict.add("rebuild", f"rebuild {flags} exited {rc}: {err.strip()[-300:]}")
                equal = False
                continue
            again = self.views()
            for key in live:
                if again[key] != live[key]:
                    equal = False
                    verdict.add("views", f"{key} differs after `projections rebuild {' '.join(flags)}`")
        log_id = self.json_of(["log", "verify"])["log_id"]
        sent = chaos_notify.check(self.sink, live["events"], log_id, self.sink_restored_at)
        for change in sent.pop("lost_examples"):
            verdict.add("notifications_lost", change)
        return {"audit_ok": audit_ok, "views_equal_rebuild": equal, **sent}

    def check_ground_truth(
        self, verdict: Verdict, deployers: list[dict[str, Any]], events: list[Any], history: dict[str, list[Any]]
    ) -> None:
        runs: list[dict[str, Any]] = []
        unfinished: dict[str, list[dict[str, Any]]] = defaultdict(list)
        gone_from, gone_to = self.gone_runs or (0, 0)
        if self.gt.exists():
            for number, line in enumerate(self.gt.read_text().splitlines()):
                parts = line.split()
                if len(parts) < 3:
                    verdict.add("gt_garbled", line)
                    continue
                kind, name, stamp = parts[:3]
                if kind == "start":
                    runs.append(
                        {"name": name, "start": float(stamp), "end": None, "gone": gone_from <= number < gone_to}
                    )
                    unfinished[name].append(runs[-1])
                elif unfinished[name]:
                    unfinished[name].pop()["end"] = float(stamp)
                else:
                    verdict.add("gt_garbled", line)
        self.counts["gt_runs"] = len(runs)
        counts = Counter(r["name"] for r in runs)
        for name, n in counts.items():
            if n > 1:
                verdict.add("duplicates", {"name": name, "starts": n})
        ended = {row["name"]: epoch(row.get("ended_at")) for row in deployers}
        by_config: dict[str, list[tuple[float, float, str, bool]]] = defaultdict(list)
        for r in runs:
            m = STEP_NAME.match(r["name"])
            if not m:
                verdict.add("gt_garbled", r["name"])
                continue
            killed = r["end"] is None
            until = r["end"] if not killed else (ended.get(r["name"]) or math.inf)
            by_config[m["config"]].append((r["start"], until, r["name"], killed))
        for config, intervals in by_config.items():
            intervals.sort()
            alive_until, holder = -math.inf, ""
            for start, until, name, _killed in intervals:
                if start < alive_until:
                    verdict.add(
                        "overlaps",
                        {"config": config, "started": name, "at": start, "while_alive": holder, "until": alive_until},
                    )
                if until > alive_until:
                    alive_until, holder = until, name
        named: set[str] = set()
        for e in events:
            collect_names(e.get("data"), named)
        for name in {r["name"] for r in runs if not r["gone"]}:
            if name not in named:
                verdict.add("unlogged_runs", name)
        self.check_completed_runs(verdict, runs, events, history)

    def check_completed_runs(
        self, verdict: Verdict, runs: list[dict[str, Any]], events: list[Any], history: dict[str, list[Any]]
    ) -> None:
        """I7: a deployment Complete in the log had its own deployer run, started after its claim, and finish."""
        claimed = {
            (e["config"], e["version"], e["data"]["attempt"]): epoch(e["timestamp"]) or 0.0
            for e in events
            if e["type"] == "DeployerClaimed"
        }
        finished = defaultdict(list)
        for r in runs:
            if r["end"] is not None:
                finished[r["name"]].append(r["start"])
        for config, rows in history.items():
            for row in rows:
                if row["phase"] != "Complete":
                    continue
                at = claimed.get((config, row["version"], row["attempt"]), math.inf)
                name = f"{config}-{row['version']}-deploy-{row['attempt']}"
                if not any(start >= at for start in finished.get(name, [])):
                    verdict.add("completed_without_run", {"deployer": name, "claimed_at": at})

    def check_freezes(self, verdict: Verdict, events: list[dict[str, Any]]) -> None:
        """claims_in_freeze: a claim whose config (or all) was frozen, by the freeze events before it in the
        log, at the claim's own timestamp (folded here on its own, apart from the audit's rule G1)."""
        frozen: dict[str | None, str | None] = {}  # config (None: all) -> until ("" for until unfreeze)
        for e in events:  # a freeze of all has no config
            if e["type"] == "Frozen":
                frozen[e["config"]] = e["data"].get("until") or ""
            elif e["type"] == "Unfrozen":
                frozen.pop(e["config"], None)
            elif e["type"] == "DeployerClaimed":
                at = datetime.fromisoformat(e["timestamp"])
                for key in (e["config"], None):
                    until = frozen.get(key)
                    if until is not None and (until == "" or at < datetime.fromisoformat(until)):
                        verdict.add("claims_in_freeze", {"position": e["position"], "config": e["config"], "by": key})
        self.counts["freezes"] = sum(1 for e in events if e["type"] == "Frozen")

    def check_exits(self, verdict: Verdict) -> None:
        """Errors outside the contract (a violation), and refusals by a phase rule (reported only)."""
        for op in self.ops:
            if op.rc is None or op.rc == 0:
                continue
            first = op.err.strip().splitlines()[0] if op.err.strip() else ""
            brief = {"op": op.id, "args": op.args[:4], "rc": op.rc, "err": op.err.strip()[-300:]}
            if op.rc == 1 and STALE_REFUSAL.search(first) and op.kind in WRITES:
                verdict.add("stale_refusals", brief)
            elif op.kind == "freeze" and op.rc == 2 and first.endswith("is not in the future") and late(op):
                verdict.add("late_freezes", {**brief, "seconds": round(op.t1 - op.t0, 1)})  # decided after its --until
            elif op.rc not in (1, 3, 4) or "Traceback" in op.err or INTERNAL_ERROR.match(first):
                verdict.add("cli_errors", brief)

    def check_writes(self, verdict: Verdict, live: dict[str, Any]) -> None:
        by_actor: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for e in live["events"]:
            by_actor[e.get("actor") or ""].append(e)
        in_history = {(c, row["version"]) for c, rows in live["history"].items() for row in rows}
        streams: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
        for e in sorted(live["events"], key=lambda e: e["position"]):
            streams[(e["config"], e["version"])].append(e)
        printed: set[tuple[str, int]] = set()
        for op in self.ops:
            if op.kind not in WRITES or op.rc is None:
                continue
            mine = by_actor.get(op.actor, [])
            types = Counter(e["type"] for e in mine)
            if op.rc != 0:
                if mine:
                    verdict.add("phantom_writes", {"op": op.id, "args": op.args, "rc": op.rc, "events": dict(types)})
                continue
            if op.version is not None:
                printed.add((op.config, op.version))  # type: ignore[arg-type]
                if (op.config, op.version) not in in_history:
                    verdict.add("lost_writes", {"op": op.id, "args": op.args, "missing_version": op.version})
                triggered = [e for e in mine if e["type"] == "RolloutTriggered"]
                if [e["version"] for e in triggered] != [op.version]:
                    verdict.add(
                        "lost_writes", {"op": op.id, "args": op.args, "printed": op.version, "events": triggered}
                    )
                if op.read_back is False:
                    verdict.add("lost_writes", {"op": op.id, "args": op.args, "not_read_back": op.version})
            expected = EXPECTED_TYPE.get(op.kind) or ("SpecChanged" if op.updated else None)
            if op.kind == "cancel":  # per version it printed: asking again what is already asked writes nothing
                for version in not_cancel_requested(op, streams):
                    verdict.add("lost_writes", {"op": op.id, "args": op.args, "out": op.out, "version": version})
            elif expected and not types[expected]:
                verdict.add("lost_writes", {"op": op.id, "args": op.args, "out": op.out, "events": dict(types)})
            if op.kind == "config_set" and not op.updated and mine:
                verdict.add("phantom_writes", {"op": op.id, "args": op.args, "out": op.out, "events": dict(types)})
        for version in sorted(in_history - printed):
            verdict.add("phantom_writes", {"version_nobody_printed": version})

    # -- everything ----------------------------------------------------------

    def run(self) -> int:
        verdict = self.verdict
        if self.args.cli == "fork":
            self.commands = ForkedCli(self.work, self.env, self.logs / "cli-server.log")
        else:
            self.commands = FreshCli(self.work, self.env)
        self.setup()
        self.maintain_controllers(verdict)
        self.issue(verdict)
        self.report_progress()
        settled = self.settle(verdict)
        self.check_exits(verdict)
        extra = self.check(verdict)
        elapsed = time.monotonic() - self.started
        result = {
            "seed": self.args.seed,
            "rollouts": self.versions,
            "controllers": self.args.controllers,
            "kills": self.counts["controller_kills"] + self.counts["shim_kills"],
            "deletes": self.counts["deletes"],
            "rebuilds": self.counts["rebuild"] + self.counts["rebuild_shadow"],
            "restores": self.counts["restores"],
            "log_restores": self.counts["log_restores"],
            "corruptions": self.counts["corruptions"],
            "duplicates": verdict.count("duplicates"),
            "completed_without_run": verdict.count("completed_without_run"),
            "restore_not_refused": verdict.count("restore_not_refused") + verdict.count("rebind"),
            "overlaps": verdict.count("overlaps"),
            "lost_writes": verdict.count("lost_writes"),
            "audit_ok": extra["audit_ok"],
            "views_equal_rebuild": extra["views_equal_rebuild"],
            "phantom_writes": verdict.count("phantom_writes"),
            "unlogged_runs": verdict.count("unlogged_runs"),
            "orphans": verdict.count("orphans"),
            "settled": settled,
            "controller_crashes": verdict.count("controller_crashes"),
            "stale_refusals": verdict.count("stale_refusals"),
            "late_freezes": verdict.count("late_freezes"),
            "cli_errors": verdict.count("cli_errors"),
            "claims_in_freeze": verdict.count("claims_in_freeze"),
            "freezes": self.counts["freezes"],
            **{k: v for k, v in extra.items() if k.startswith("notifications")},
            "configs": self.configs_count,
            "profile": "scale" if self.args.scale else "default",
            "store": "postgresql" if self.args.store else "sqlite",
            "cli": self.args.cli,
            "commands": sum(1 for op in self.ops if op.kind in WRITES),
            "controller_kills": self.counts["controller_kills"],
            "shim_kills": self.counts["shim_kills"],
            "gt_runs": self.counts["gt_runs"],
            "seconds": round(elapsed, 1),
        }
        failed = any(result[k] for k in VIOLATION_COUNTS) or not all(result[k] for k in VIOLATION_FLAGS)
        # A notification may come twice only when a controller died sending it (same key and body).
        failed = failed or result["notifications_duplicated"] > self.counts["controller_kills"]
        exits = Counter(f"{op.kind}:{op.rc}" for op in self.ops if op.kind in WRITES)
        print(json.dumps({"exit_codes": dict(sorted(exits.items()))}), file=sys.stderr)
        if self.commands is not None and self.commands.cpu_by:  # (known with --cli fork: the server reaps them)
            own = resource.getrusage(resource.RUSAGE_SELF)
            cpu = {"this driver": round(own.ru_utime + own.ru_stime, 1)}
            cpu.update((k, round(v, 1)) for k, v in self.commands.cpu_by.most_common())
            print(json.dumps({"cpu_seconds_by_command": cpu}), file=sys.stderr)
        if verdict.details:
            print(json.dumps({"details": {k: v[:20] for k, v in verdict.details.items()}}, indent=1), file=sys.stderr)
        self.keep = self.args.keep or failed
        print(json.dumps(result), flush=True)
        return 1 if failed else 0


VIOLATION_COUNTS = (
    "duplicates",
    "completed_without_run",
    "restore_not_refused",
    "overlaps",
    "lost_writes",
    "phantom_writes",
    "unlogged_runs",
    "orphans",
    "cli_errors",
    "claims_in_freeze",
    "notifications_lost",
    "notifications_misordered",
    "notifications_bad_keys",
)
VIOLATION_FLAGS = ("audit_ok", "views_equal_rebuild", "settled")


def late(op: Op) -> bool:
    """Whether a freeze op ended after its own --until (a loaded machine: the command took that long)."""
    until = op.args[op.args.index("--until") + 1] if "--until" in op.args else None
    return until is not None and op.t1 >= datetime.fromisoformat(until).timestamp()


def not_cancel_requested(op: Op, streams: dict[tuple[str, int], list[dict[str, Any]]]) -> list[int]:
    """The versions a `rollout cancel` that exited 0 printed whose cancel the log does not hold: not its
    own CancelRequested (a retry by another command after it, even before this one ended, takes
    nothing away from it), nor, by the time the command ended, one before it that no retry followed
    (a cancel of a deployment whose cancel is already requested is acknowledged and appends nothing)."""
    printed = [int(v) for v in re.findall(r"\d+", op.out.partition(" version ")[2])]
    missing = []
    for version in printed:
        events = streams.get((op.config, version), [])  # in log order
        if any(e["type"] == "CancelRequested" and e["actor"] == op.actor for e in events):
            continue
        last = None
        for e in events:
            if e["type"] in ("CancelRequested", "RetryRequested") and (epoch(e["timestamp"]) or math.inf) <= op.t1:
                last = e["type"]
        if last != "CancelRequested":
            missing.append(version)
    return missing if printed else [0]  # (no version printed: nothing to show for the exit 0)


def collect_names(value: Any, into: set[str]) -> None:
    """Every deployer or hook name mentioned anywhere in an event's data."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "name" and isinstance(item, str):
                into.add(item)
            else:
                collect_names(item, into)
    elif isinstance(value, list):
        for item in value:
            collect_names(item, into)


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with contextlib.suppress(Exception), psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--configs", type=int, help="configs to run (default 3; 24 with --scale)")
    p.add_argument("--rollouts", type=int, default=20, help="stop issuing once this many versions were triggered")
    p.add_argument("--controllers", type=int, default=2)
    p.add_argument("--minutes", type=float, default=1.0, help="stop issuing after this long in any case")
    p.add_argument("--workers", type=int, help="CLI commands running at once (default 4)")
    p.add_argument(
        "--scale",
        action="store_true",
        help="the profile for many rollouts: more configs, a mix of commands weighted to triggering, shorter steps",
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary directory even on success")
    p.add_argument(
        "--cli",
        choices=("fork", "spawn"),
        default="fork",
        help="start each command forked from a warm interpreter (bench/cli_server.py, the default) or as a fresh one",
    )
    p.add_argument(
        "--restore-log",
        action="store_true",
        help="the first restore puts back an old copy of the log too (then rebinds)",
    )
    p.add_argument(
        "--store",
        metavar="URL",
        help="a PostgreSQL server (postgresql://USER@HOST:PORT/DB): the log goes to a schema of its own there",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="narrate chaos on stderr")
    args = p.parse_args(argv)
    if args.store and args.restore_log:
        p.error("--restore-log puts back a copy of a SQLite log: it does not combine with --store")
    if args.store and not args.store.startswith(("postgresql://", "postgres://")):
        p.error("--store takes a postgresql:// URL")
    given = [n for n in (args.configs, args.workers) if n is not None]
    if min(args.rollouts, args.controllers, *given) < 1 or args.minutes <= 0:
        p.error("--configs, --rollouts, --controllers, --workers and --minutes must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def terminate(signum: int, _: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    chaos = Chaos(args)
    chaos.keep = True
    code = 2
    try:
        code = chaos.run()
    except KeyboardInterrupt:
        print("chaos: interrupted", file=sys.stderr)
        code = 130
    except Exception as error:  # noqa: BLE001 - report, clean up, keep the evidence
        import traceback

        traceback.print_exc()
        print(f"chaos: error: {error}", file=sys.stderr)
        code = 2
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        chaos.cleanup()
        if chaos.keep:
            print(f"chaos: evidence kept in {chaos.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(chaos.tmp, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
