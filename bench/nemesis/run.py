#!/usr/bin/env python
"""Faults between hosts (DESIGN 7.7): controllers on network namespaces sharing one PostgreSQL log
through fault proxies, with ground truth written by the deployers themselves.

    sudo python bench/nemesis/run.py --seed 1 --minutes 1                    (the CI size)
    sudo python bench/nemesis/run.py --seed 2 --rollouts 1000 --minutes 15   (the full size)

Hosts (--hosts, at least 3): each a network namespace (`ip netns` and a veth pair: root is needed)
with its own home, its own controller (`controller run`, as a real process in the namespace) and its
own CLI fork server (bench/shared/cli_server.py, started in the namespace: every command of that host is a
process there). Each reaches PostgreSQL (127.0.0.1:5432) only through its fault proxy in the root
namespace, on the veth's root address (bench/nemesis/net.py). The log is in a schema of the run's
own, dropped at the end; namespaces and veths are removed at the end, on failure too, and those an
earlier run that died left (named nmt...) at the start. Runs side by side keep apart (each holds
its own tag: bench/nemesis/net.py), though they share the machine's two cores and its timing.

Faults (bench/nemesis/faults.py), seeded, one window per host at a time, every kind as often:
partition (both ways), replies lost (COMMIT's outcome unknown), delay past the lease, connection
resets, a host paused (SIGSTOP of every pid of the namespace for 0.5-3 leases, its deployers woken
first), a host's wall clock stepped by +-(L/2..2L), every controller connection killed
(pg_terminate_backend), a controller SIGKILLed.

The clock step: libfaketime cannot step Python's wall clock alone (DESIGN 9), and the code has no
clock port, so every Python process of the host (controller, commands, shims: all started with
PYTHONPATH naming bench/nemesis/clock/) loads a sitecustomize that adds the host's offset, which the
harness writes to a file, to time.time, time.time_ns, datetime.now and datetime.utcnow. The
monotonic and boot clocks (the shims' heartbeat), the database's clock (leases, `claim check`) and
the deployers' shell `date` (the ground truth: one real clock for every host) are not stepped.

Operations from random hosts: rollout latest [--supersede], cancel, retry, undo, promote, abort,
approve (configs with --require-approval, some with --steps and --step-pause manual). Each deployer
is `sh -c` writing to a file outside the tool: `start NAME T PID CLAIM`, then per tick `rollouts claim
check` and `tick NAME T_WRITTEN T_CHECK_STARTED` (or `refused NAME T RC` and exit 75), then `end NAME T
RC`. The checker (bench/nemesis/checks.py) reads that and what each command printed.

The last line of stdout is one JSON object; exit 1 on any violation, 2 when the run could not be made.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shlex
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.chaos.model import REPO, Op, Verdict, tail  # noqa: E402
from bench.nemesis import net as nemesis_net  # noqa: E402
from bench.nemesis.checks import WATCH_S, NemesisChecks  # noqa: E402
from bench.nemesis.faults import KINDS, FaultDriver, Window  # noqa: E402
from bench.shared.cli_server import ForkedCli  # noqa: E402
from bench.shared.harness import run_keeping_evidence  # noqa: E402

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
CLOCK_DIR = Path(__file__).resolve().parent / "clock"
ROLLOUTS = str(Path(sys.executable).parent / "rollouts")
WEIGHTS = {
    "latest": 18,
    "latest_supersede": 24,
    "cancel": 5,
    "retry": 8,
    "undo": 5,
    "promote": 6,
    "abort": 4,
    "approve": 10,
}
OP_TIMEOUT = 300.0


class HostState:
    """One host as the harness keeps it: namespace, proxy, home, command server, controller."""

    def __init__(self, net: nemesis_net.Host, proxy: nemesis_net.FaultProxy, tmp: Path) -> None:
        self.index = net.index
        self.net, self.proxy = net, proxy
        self.home = tmp / f"home-{net.index}"
        self.clock_file = str(tmp / f"clock-{net.index}")
        Path(self.clock_file).write_text("0")
        self.cli: ForkedCli | None = None
        self.controller: Any = None
        self.generation = 0
        self.down_until = 0.0
        self.window: Window | None = None
        self.paused = False
        self.claimant: str | None = None


def deployer_script(gt: Path, ticks: int, sleep: float) -> str:
    out, check = shlex.quote(str(gt)), shlex.quote(ROLLOUTS)
    return (
        f'echo "start $ROLLOUT_DEPLOYER $(date +%s.%N) $$ $ROLLOUT_CLAIM" >> {out}; i=0; '
        f"while [ $i -lt {ticks} ]; do c=$(date +%s.%N); {check} claim check >/dev/null 2>&1; r=$?; "
        f'if [ $r -ne 0 ]; then echo "refused $ROLLOUT_DEPLOYER $(date +%s.%N) $r" >> {out}; exit 75; fi; '
        f'echo "tick $ROLLOUT_DEPLOYER $(date +%s.%N) $c" >> {out}; sleep {sleep}; i=$((i + 1)); done; '
        f'rc=${{FAIL_DEPLOY:-0}}; echo "end $ROLLOUT_DEPLOYER $(date +%s.%N) $rc" >> {out}; exit $rc'
    )


class Nemesis(FaultDriver, NemesisChecks):
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.fault_rng = random.Random(args.seed * 7919 + 1)
        self.lease = args.lease
        self.gap = args.gap if args.gap else args.lease * 0.8
        self.tag, self.tag_lock = nemesis_net.claim_tag()  # names and subnets no live run uses
        self.tmp = Path(tempfile.mkdtemp(prefix=f"rollouts-nemesis-{args.seed}-"))
        self.gt = self.tmp / "ground-truth"
        self.logs = self.tmp / "logs"
        self.logs.mkdir()
        self.schema = f"nemesis_{args.seed}_{uuid.uuid4().hex[:8]}"
        self.pg_url = args.store
        self.hosts: list[HostState] = []
        self.proxies: nemesis_net.ProxyLoop | None = None
        self.windows: list[Window] = []
        self.lock = threading.Lock()
        self.ops: list[Op] = []
        self.op_ids = 0
        self.versions = 0
        self.counts: Counter[str] = Counter()
        self.configs: list[str] = []
        self.approval: set[str] = set()
        self.manual: set[str] = set()
        self.fault_stop = threading.Event()
        self.watch_stop = threading.Event()
        self.next_fault = 0.0
        self.renewals: dict[str, list[float]] = {}  # claimant -> renewed_at values seen (database clock)
        self.deaths: dict[str, float] = {}  # deployer name -> when its pid was gone (real clock)
        self.started = time.monotonic()
        self.verdict = Verdict()
        self.keep = True
        self.journal = open(self.tmp / "ops.jsonl", "w")  # noqa: SIM115 - closed in cleanup()

    def log(self, text: str) -> None:
        if self.args.verbose:
            print(f"[{time.monotonic() - self.started:7.1f}s] {text}", file=sys.stderr, flush=True)

    # -- making and unmaking hosts ------------------------------------------------------------------

    def make_hosts(self) -> None:
        left = nemesis_net.cleanup_leftovers()
        if left:
            self.log(f"removed leftovers of an earlier run: {left}")
        self.proxies = nemesis_net.ProxyLoop()
        for i in range(self.args.hosts):
            net = nemesis_net.Host.make(i, self.tag)
            host = HostState(net, self.proxies.add(net.root_ip), self.tmp)
            self.hosts.append(host)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("ROLLOUTS_", "NEMESIS_"))}
            env.update(
                ROLLOUTS_HOME=str(host.home),
                ROLLOUTS_STORE=f"postgresql://postgres@{net.root_ip}:{nemesis_net.PROXY_PORT}/test"
                f"?schema={self.schema}&application_name={self.schema}",  # terminate's mark: this run's clients
                ROLLOUTS_LEASE_SECONDS=f"{self.lease:g}",
                NEMESIS_CLOCK_FILE=host.clock_file,
                PYTHONPATH=os.pathsep.join((str(CLOCK_DIR), str(REPO))),
            )
            work = self.tmp / f"work-{i}"
            work.mkdir()
            host.cli = ForkedCli(work, env, self.logs / f"cli-server-{i}.log", prefix=tuple(net.prefix()))

    def cleanup(self) -> None:
        self.fault_stop.set()
        self.watch_stop.set()
        for host in self.hosts:
            with contextlib.suppress(Exception):
                nemesis_faults_wake(host)
        for host in self.hosts:
            if host.controller is not None:
                with contextlib.suppress(Exception):
                    host.controller.kill()
            if host.cli is not None:
                with contextlib.suppress(Exception):
                    host.cli.close(timeout=10)
        for host in self.hosts:
            with contextlib.suppress(Exception):
                host.net.remove()
        if self.proxies is not None:
            self.proxies.close()
        with contextlib.suppress(Exception):
            nemesis_net.cleanup_leftovers()
        with contextlib.suppress(Exception):
            self.journal.close()
        self.tag_lock.close()
        if not self.keep:
            drop_schema(self.pg_url, self.schema)

    # -- controllers --------------------------------------------------------------------------------

    def start_controller(self, host: HostState) -> None:
        host.generation += 1
        path = self.logs / f"controller-{host.index}-{host.generation}.log"
        argv = ["--as", f"nemesis-controller-{host.index}", "controller", "run", "--interval", "0.1"]
        with open(path, "wb") as log:
            assert host.cli is not None
            host.controller = host.cli.spawn(argv, log.fileno(), log.fileno())
        host.controller_log = path

    def kill_controller(self, host: HostState, *, delay: float) -> bool:
        c = host.controller
        if c is None or c.poll() is not None:
            return False
        c.kill()
        host.controller = None
        host.down_until = time.monotonic() + delay
        return True

    def maintain_controllers(self) -> None:
        now = time.monotonic()
        for host in self.hosts:
            c = host.controller
            if c is not None and c.poll() is not None and not host.paused:
                if c.returncode == 5:  # the store could not be reached (its contract): a supervisor starts it again
                    self.counts["controller_exits_5"] += 1
                elif c.returncode != -signal.SIGKILL:
                    self.verdict.add("controller_crashes", {"host": host.index, "rc": c.returncode,
                                                            "log": tail(host.controller_log)})  # fmt: skip
                host.controller = None
            if host.controller is None and now >= host.down_until and host.window is None:
                self.start_controller(host)

    # -- what the harness watches -------------------------------------------------------------------

    def watch_loop(self) -> None:
        """Lease renewals as the database records them, and when each deployer's process was gone."""
        import psycopg

        live: dict[int, str] = {}
        offset = 0
        conn = psycopg.connect(f"{self.pg_url}?application_name=nemesis-harness", autocommit=True)
        table = f'"{self.schema}".rollouts_leases'
        with conn:
            while not self.watch_stop.is_set():
                with contextlib.suppress(psycopg.Error):
                    for claimant, renewed in conn.execute(f"SELECT claimant, renewed_at FROM {table}").fetchall():
                        seen = self.renewals.setdefault(claimant, [])
                        if not seen or seen[-1] != renewed:
                            seen.append(renewed)
                if self.gt.exists():
                    with open(self.gt) as f:
                        f.seek(offset)
                        chunk = f.read()
                    complete = chunk[: chunk.rfind("\n") + 1]
                    offset += len(complete.encode())
                    for line in complete.splitlines():
                        parts = line.split()
                        if len(parts) >= 4 and parts[0] == "start" and parts[3].isdigit():
                            live[int(parts[3])] = parts[1]
                for pid, name in list(live.items()):
                    if not pid_alive(pid):
                        self.deaths[name] = time.time()
                        del live[pid]
                self.watch_stop.wait(WATCH_S)

    # -- setup and operations -----------------------------------------------------------------------

    def cli(self, host: HostState, args: list[str], actor: str | None = None) -> tuple[int | None, str, str]:
        assert host.cli is not None
        rc, out, err, _ = host.cli.run([*(["--as", actor] if actor else []), *args], OP_TIMEOUT)
        return rc, out, err

    def setup(self) -> None:
        rng = self.rng
        host = self.hosts[0]
        for i in range(self.args.configs):
            name = f"nem-{i}"
            argv = ["config", "create", name, "--env", "NOISE=0"]
            draw = rng.random()
            if draw < 0.3:
                argv.append("--require-approval")
                self.approval.add(name)
            elif draw < 0.55:
                argv += ["--steps", "50,100", "--step-pause", "manual"]
                self.manual.add(name)
            argv += ["--", "sh", "-c", deployer_script(self.gt, rng.choice((1, 1, 2)), rng.choice((0.1, 0.2, 0.4)))]
            rc, _, err = self.cli(host, argv, actor="nemesis-setup")
            if rc != 0:
                raise RuntimeError(f"config create {name}: exit {rc}: {err.strip()[-300:]}")
            self.configs.append(name)

    def draw(self) -> tuple[Op, HostState]:
        rng = self.rng
        kind = rng.choices(list(WEIGHTS), list(WEIGHTS.values()))[0]
        pool = {"promote": self.manual, "approve": self.approval}.get(kind) or self.configs
        name = rng.choice(sorted(pool) or self.configs)
        host = rng.choice(self.hosts)
        if kind in ("latest", "latest_supersede"):
            args = ["rollout", "latest", name, "--reason", f"nemesis {self.op_ids + 1}"]
            args += ["--supersede"] if kind == "latest_supersede" else []
        elif kind == "abort":
            args = ["rollout", "abort", name, "--reason", f"nemesis {self.op_ids + 1}"]
        else:
            args = ["rollout", kind, name]
        self.op_ids += 1
        op = Op(self.op_ids, kind, name, args, actor=f"nemesis-op-{self.op_ids}")
        op.pick = host.index  # (the host it ran on)
        self.ops.append(op)
        return op, host

    def run_op(self, op: Op, host: HostState) -> Op:
        op.t0 = time.time()
        try:
            op.rc, op.out, op.err = self.cli(host, op.args, actor=op.actor)
            out = op.out.strip()
            if op.rc == 0 and op.kind in ("latest", "latest_supersede") and out.isdigit():
                op.revision = int(out)
            elif op.rc == 0 and op.kind == "undo":
                found = [w for w in out.split() if w.isdigit()]
                op.revision = int(found[-1]) if "as version" in out and found else None
            if op.revision is not None:
                with self.lock:
                    self.versions += 1
        finally:
            op.t1 = time.time()
            with self.lock, contextlib.suppress(ValueError):
                self.journal.write(json.dumps({**op.__dict__, "host": host.index}) + "\n")
        return op

    def issue(self) -> None:
        deadline = time.monotonic() + self.args.minutes * 60
        inflight: set[Future[Op]] = set()
        last = time.monotonic()
        with ThreadPoolExecutor(self.args.workers) as pool:
            while self.wanting() and time.monotonic() < deadline:
                self.maintain_controllers()
                done = {f for f in inflight if f.done()}
                for f in done:
                    f.result()
                inflight -= done
                if len(inflight) >= self.args.workers:
                    wait(inflight, timeout=0.1, return_when=FIRST_COMPLETED)
                    continue
                op, host = self.draw()
                inflight.add(pool.submit(self.run_op, op, host))
                if time.monotonic() - last > 15:
                    last = time.monotonic()
                    self.progress()
            wait(inflight)
            for f in inflight:
                f.result()

    def wanting(self) -> bool:
        """Whether the run still wants rollouts, or fault windows (--min-faults, at least 40 of each kind)."""
        kinds = Counter(w.kind for w in self.windows)
        faults = len(self.windows) < self.args.min_faults or (
            self.args.min_faults >= 300 and min(kinds.get(k, 0) for k in KINDS) < 40
        )
        return self.versions < self.args.rollouts or faults

    def progress(self) -> None:
        kinds = Counter(w.kind for w in self.windows)
        codes = Counter(op.rc for op in self.ops)
        print(f"[{time.monotonic() - self.started:6.0f}s] versions {self.versions}/{self.args.rollouts},"
              f" ops {len(self.ops)} {dict(codes)}, faults {len(self.windows)} {dict(kinds)}",
              file=sys.stderr, flush=True)  # fmt: skip

    def settle(self) -> bool:
        """Faults off, every host awake, everything open cancelled, one until-idle pass to the end."""
        self.fault_stop.set()
        self.fault_thread.join(60)
        for host in self.hosts:
            host.down_until = 0.0
        self.maintain_controllers()
        host = self.hosts[0]
        for name in self.configs:
            self.op_ids += 1
            op = Op(self.op_ids, "cancel", name, ["rollout", "cancel", name], actor=f"nemesis-settle-{self.op_ids}")
            self.ops.append(op)
            self.run_op(op, host)
        argv = ["controller", "run", "--until-idle", "--interval", "0.1", "--timeout", "180", "-q"]
        rc, _, err = self.cli(host, argv, actor="nemesis-settle")
        if rc != 0:
            self.verdict.add("settle", f"until-idle exited {rc}: {err.strip()[-300:]}")
        for h in self.hosts:
            if h.controller is not None:
                h.controller.terminate()
        for h in self.hosts:
            if h.controller is not None:
                with contextlib.suppress(Exception):
                    h.controller.wait(30)
        time.sleep(self.lease)  # the watcher sees the last deployers end
        self.watch_stop.set()
        return rc == 0

    def run(self) -> int:
        self.make_hosts()
        watcher = threading.Thread(target=self.watch_loop, name="nemesis-watch", daemon=True)
        self.setup()
        watcher.start()
        for host in self.hosts:
            self.start_controller(host)
        self.fault_thread = threading.Thread(target=self.fault_loop, name="nemesis-faults", daemon=True)
        self.fault_thread.start()
        self.issue()
        self.progress()
        settled = self.settle()
        with open(self.tmp / "windows.jsonl", "w") as f:
            f.writelines(json.dumps(w.__dict__) + "\n" for w in self.windows)
        watcher.join(30)
        result = self.check(settled)
        failed = bool(result["violations"]) or not settled
        self.keep = self.args.keep or failed
        if self.verdict.details:
            print(json.dumps({"details": {k: v[:20] for k, v in self.verdict.details.items()}}, indent=1,
                             default=str), file=sys.stderr)  # fmt: skip
        print(json.dumps(result), flush=True)
        return 1 if failed else 0


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with contextlib.suppress(Exception), psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def postgres_problem(url: str) -> str | None:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except Exception as error:  # noqa: BLE001 - any reason is the reason
        return f"PostgreSQL unreachable at {url}: {' '.join(str(error).split())}"
    return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hosts", type=int, default=3)
    p.add_argument("--configs", type=int, default=8)
    p.add_argument("--rollouts", type=int, default=1000, help="stop issuing once this many versions were printed")
    p.add_argument("--minutes", type=float, default=1.0, help="stop issuing after this long in any case")
    p.add_argument("--min-faults", type=int, default=0, help="and go on until this many fault windows were opened")
    p.add_argument("--lease", type=float, default=4.0, help="ROLLOUTS_LEASE_SECONDS of every host (L)")
    p.add_argument("--gap", type=float, help="mean seconds between fault windows (default 0.8 L)")
    p.add_argument("--workers", type=int, default=6, help="commands in flight at once")
    p.add_argument("--store", default=POSTGRES, help="the PostgreSQL server (the log goes to a schema of its own)")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--verbose", "-v", action="store_true")
    args = p.parse_args(argv)
    if args.hosts < 3:
        p.error("--hosts: at least 3")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    why = nemesis_net.unavailable() or postgres_problem(args.store)
    if why:
        print(json.dumps({"skipped": why}))
        return 2
    return run_keeping_evidence("nemesis", Nemesis(args))


def nemesis_faults_wake(host: HostState) -> None:
    for pid in host.net.pids():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    with contextlib.suppress(Exception):
        host.net.link(True)
    host.proxy.set("ok")
    Path(host.clock_file).write_text("0")


if __name__ == "__main__":
    sys.exit(main())
