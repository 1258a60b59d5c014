#!/usr/bin/env python
"""A seeded, bounded chaos run of Rollouts with real processes on one temporary home (SQLite or PostgreSQL).

    python bench/chaos/run.py --seed 1 --configs 3 --rollouts 20 --controllers 2 --minutes 1
    python bench/chaos/run.py --seed 2 --store postgresql://postgres@127.0.0.1:5432/test   (the log in a fresh schema)
    python bench/chaos/run.py --seed 3 --scale --rollouts 2500 --minutes 40                (many rollouts: see below)

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
- with --moves N, the log moves N times (bench/chaos/moves.py): sealed while controllers run,
  imported into a fresh home and store (a new schema with --store), the old controllers left
  running on the sealed log; sealed_not_refused counts a write, a late controller or an old
  controller the sealed log did not refuse (exit 1 naming the seal), move_failures a seal or
  import that did not happen; every other check runs on the last log, which holds them all
  (a copy of the views is not restored across a move: it is another log's); on SQLite, copies of the
  log sealed behind the source's back and imported elsewhere, copy_ran_twice counting a deployer of
  the source's history that ran in both;
- claims_in_freeze: a DeployerClaimed event made while its config (or all) was frozen, by the
  Frozen/Unfrozen events before it and its own timestamp against --until (`freeze`/`unfreeze`
  ops of one config or of all, for 5-20 s or until an unfreeze, run among the others; the
  settle lifts them first); freezes: how many the log holds; late_freezes (reported only): a
  freeze refused (exit 2) because the command decided after its own --until;
- cli_errors, a violation: exit codes or errors outside the contract (a traceback, exit 5,
  "error: OperationalError: ..."); reported without failing the run: stale_refusals (a
  write refused by a phase rule; a torn read not decided again shows here, but so does a
  legitimate refusal, such as a retry of a deployment that is still running).

`--steps` (bench/chaos/steps.py): most configs get `--steps`, a `--verify` whose outcome the run's
seed draws (exit 0, 1 or 3 by a hash of the seed and the measurement's name, the failing share a config
env var `config set` flips), `--auto-rollback` (most) and `--step-pause manual` (some); `rollout
promote [--full]` and `rollout abort` join the ops (fewer supersedes: a cancel calls for no rollback).
Measurements write to GT like deployers (their exit code too), and the run checks I9 from GT (a
Complete deployment's steps all ran to exit 0 in order, no measurement of it exited 1 unless promoted),
each measurement's outcome in the log against its GT exit code, and I10 from the log (each failure
that calls for a rollback has exactly one, to the last Complete version before it; none other).

`--templates` (bench/chaos/templates.py; implies --steps): the stepped configs name one to three analysis
templates (DESIGN 7.9): prometheus, asking a real Prometheus (Debian's, started by the run on a free loopback
port, scraping a prometheus_client app of the run's), http, asking an HTTP server in the run, and command (7.6's
seeded measurement); the run flips what the servers answer per config (passed, failed, inconclusive, empty,
an error reply), `analysis set` edits the templates among the ops, and the checks add that every claim fixed
the templates' revisions in force in the log then (template_claim_stale) and every measurement ran the
revision its claim fixed (template_revision_mismatches, from the runtime's rows and the ground truth). Here
(2 busy cores) a 1,000-rollout run (`--templates --scale --rollouts 1000`) takes ~10 min on SQLite.

How commands start (`--cli`): by default each command, and each controller, is a child forked by
one warm interpreter (bench/shared/cli_server.py) that runs the real entry point, `rollouts.adapters.cli.main()`,
with its argv: a process of its own (pid, stdin from /dev/null, its own stdout and stderr, exit
code, SIGKILLed at a timeout or by the chaos), sharing only the interpreter's start-up and imports
(a SQLite `config list`: ~0.05 s of CPU forked, ~0.45 s as a fresh interpreter). `--cli spawn`
starts each as `python -m rollouts` as before. With the fork server, stderr ends with the CPU
seconds of the commands by command (controllers included; not the shims and deployers they start).

`--stages` (bench/chaos/stages.py): the configs form pipelines of three stages, each taking IMAGE from the
one before with `--promote auto`; `rollout latest --queue` joins the ops; the run checks each promotion's
artifact and eligibility, and that the controllers promoted each auto stage once per eligible revision.

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
import dataclasses
import json
import os
import random
import resource
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rollouts.adapters.runtime.procs import is_alive, signal_group

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.chaos import notify as chaos_notify  # noqa: E402 - bench/chaos/notify.py: the notification sink of the run
from bench.chaos.checks import VIOLATION_COUNTS, VIOLATION_FLAGS, Checks  # noqa: E402
from bench.chaos.faults import Faults  # noqa: E402
from bench.chaos.model import (  # noqa: E402
    DEFAULT,
    POLICIES,
    REPO,
    SCALE,
    STEP_WEIGHTS,
    TEMPLATE_WEIGHTS,
    WRITES,
    Conf,
    Controller,
    Op,
    Verdict,
    step_script,
)
from bench.chaos.moves import Moves  # noqa: E402
from bench.chaos.ops import Operations  # noqa: E402
from bench.chaos.stages import STAGE_VIOLATIONS, STAGE_WEIGHTS, Stages  # noqa: E402
from bench.chaos.steps import STEP_VIOLATIONS, Steps  # noqa: E402
from bench.chaos.templates import TEMPLATE_VIOLATIONS, Templates  # noqa: E402
from bench.shared.cli_server import ForkedCli, FreshCli  # noqa: E402 - bench/shared/cli_server.py: how commands start
from bench.shared.harness import run_keeping_evidence  # noqa: E402


class Chaos(Operations, Faults, Moves, Steps, Stages, Templates, Checks):
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.profile = SCALE if args.scale else DEFAULT
        if args.steps:
            self.profile = dataclasses.replace(self.profile, weights={**self.profile.weights, **STEP_WEIGHTS})
        if args.stages:
            self.profile = dataclasses.replace(self.profile, weights={**self.profile.weights, **STAGE_WEIGHTS})
        if args.templates:
            self.profile = dataclasses.replace(self.profile, weights={**self.profile.weights, **TEMPLATE_WEIGHTS})
        self.stepped: set[str] = set()  # --steps: configs with steps and a verification
        self.manual: set[str] = set()  # --steps: configs whose steps pause for `rollout promote`
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
        self.log_ids: list[str] = []  # --moves: the ids of the logs the run moved from and to
        self.old_deployers: list[dict[str, Any]] = []  # --moves: `deployers list --all` of each home left
        self.move_cuts: list[int] = []  # --moves: the sink's requests before each move
        self.move_schemas: list[str] = []  # --moves with --store: the schemas moved to
        self.old_commands: list[Any] = []  # --moves: the command servers of the homes left (closed at the end)
        self.copy_homes: set[str] = set()  # --moves: the copies sealed behind the source's back (moves.py)
        self.copy_deployers: dict[str, list[str]] = {}  # --moves: the deployer names each copy's import ran

    def cleanup(self) -> None:
        """Stop everything this run started: commands, controllers, shims, deployer groups."""
        self.stopping = True
        for c in self.controllers:
            if c.proc is not None and c.proc.poll() is None:
                c.proc.kill()
                with contextlib.suppress(RuntimeError):  # (the fork server died: its children are gone with it)
                    c.proc.wait()
        for commands in [*self.old_commands, self.commands]:
            if commands is not None:
                commands.close()  # kills the commands still running
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
        self.close_templates()
        if self.schema and not self.keep:
            for schema in (self.schema, *self.move_schemas):
                drop_schema(self.args.store, schema)

    def log(self, text: str) -> None:
        if self.args.verbose:
            print(f"[{time.monotonic() - self.started:7.1f}s] {text}", file=sys.stderr, flush=True)

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
            args += self.step_options(name) + self.stage_options(i)
            args += ["--", "sh", "-c", step_script(self.gt, self.sleep(), "deploy")]
            self.configs.append(Conf(name, trigger))
            create_ops.append(self.new_op("config_create", name, args))
        with ThreadPoolExecutor(1 if self.args.stages else 4) as pool:  # (a stage's upstream first)
            list(pool.map(self.run_op, create_ops))
        failed = [op for op in create_ops if op.rc != 0]
        if failed:
            raise RuntimeError(f"config create failed: {failed[0].rc} {failed[0].err.strip()}")

    def progress(self) -> float:
        by_count = self.versions / max(1, self.args.rollouts)
        by_time = (time.monotonic() - self.issue_start) / (self.args.minutes * 60)
        return max(by_count, by_time)

    def report_progress(self) -> None:
        elapsed = time.monotonic() - self.started
        codes = Counter(op.rc for op in self.ops if op.kind in WRITES)
        print(
            f"[{elapsed:6.0f}s] versions {self.versions}/{self.args.rollouts}, ops {len(self.ops)}, "
            f"exits {dict(codes)}, {dict(self.counts)}",
            file=sys.stderr,
            flush=True,
        )

    def run(self) -> int:
        verdict = self.verdict
        if self.args.cli == "fork":
            self.commands = ForkedCli(self.work, self.env, self.logs / "cli-server.log")
        else:
            self.commands = FreshCli(self.work, self.env)
        self.start_templates()
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
            "moves": self.counts["moves"],
            "sealed_not_refused": verdict.count("sealed_not_refused"),
            "move_failures": verdict.count("move_failures"),
            "old_controllers_refused": self.counts["old_controllers_refused"],
            **{k: self.counts[k] for k in ("copies", "copies_sealed", "copies_refused")},
            "copy_ran_twice": verdict.count("copy_ran_twice"),
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
            **{k: verdict.count(k) for k in STEP_VIOLATIONS},
            **{k: verdict.count(k) for k in TEMPLATE_VIOLATIONS},
            **{k: self.counts[k] for k in ("template_runs_checked", "template_edits")},
            **{k: self.counts[k] for k in ("measurements", "promotes", "aborts", "rollbacks")},
            "measurements_by_outcome": self.counts["measurements_by_outcome"] or {},
            "stepped_configs": len(self.stepped),
            **{k: verdict.count(k) for k in STAGE_VIOLATIONS},
            **{k: self.counts[k] for k in ("promotions_auto", "promotions_manual", "queued", "superseded")},
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
        failed = any(result[k] for k in (*VIOLATION_COUNTS, *STEP_VIOLATIONS, *STAGE_VIOLATIONS, *TEMPLATE_VIOLATIONS))
        failed = failed or not all(result[k] for k in VIOLATION_FLAGS)
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
        help="start each command forked from a warm interpreter (bench/shared/cli_server.py, the default) or fresh",
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
    p.add_argument(
        "--moves",
        type=int,
        default=0,
        metavar="N",
        help="move the log N times: seal it, import it into a fresh store, the old controllers left running",
    )
    p.add_argument(
        "--steps",
        action="store_true",
        help="most configs get weighted steps, a verification of random outcome, auto-rollback, some manual"
        " pauses; promote and abort among the ops (bench/chaos/steps.py)",
    )
    p.add_argument(
        "--stages",
        action="store_true",
        help="the configs form pipelines of 3 stages with auto promotion; rollout latest --queue among the ops"
        " (bench/chaos/stages.py)",
    )
    p.add_argument(
        "--templates",
        action="store_true",
        help="--steps, and the stepped configs name analysis templates (a real Prometheus, an HTTP server, a"
        " command) of random outcome, edited by `analysis set` among the ops (bench/chaos/templates.py)",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="narrate chaos on stderr")
    args = p.parse_args(argv)
    args.steps = args.steps or args.templates
    if args.store and args.restore_log:
        p.error("--restore-log puts back a copy of a SQLite log: it does not combine with --store")
    if args.moves and args.restore_log:
        p.error("--restore-log puts back a copy of the home's own log: it does not combine with --moves")
    if args.moves < 0:
        p.error("--moves must not be negative")
    if args.store and not args.store.startswith(("postgresql://", "postgres://")):
        p.error("--store takes a postgresql:// URL")
    given = [n for n in (args.configs, args.workers) if n is not None]
    if min(args.rollouts, args.controllers, *given) < 1 or args.minutes <= 0:
        p.error("--configs, --rollouts, --controllers, --workers and --minutes must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    chaos = Chaos(args)
    chaos.keep = True
    return run_keeping_evidence("chaos", chaos)


if __name__ == "__main__":
    sys.exit(main())
