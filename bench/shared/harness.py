"""What every figure of bench/run.py runs in: the run's sizes, temporary homes and the processes started for
them (all stopped by `Workspace.close()`), configs made in bulk, and a follower of deployments reaching an end."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rollouts.adapters.home import Home
from rollouts.domain import ids
from rollouts.domain.spec import Spec

# The processes timed here run as an installed copy does, from cached bytecode: with the
# PYTHONDONTWRITEBYTECODE that some sandboxes set, each would compile the project's modules again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

PYTHON = sys.executable
ROLLOUTS = [str(Path(PYTHON).with_name("rollouts"))]
if not Path(ROLLOUTS[0]).exists():
    ROLLOUTS = [PYTHON, "-m", "rollouts"]
ACTOR = "bench@rollouts"
TERMINAL_TOPICS = tuple(
    f"domain.deployment:Deployment.{t}" for t in ("DeployerSucceeded", "DeployerFailed", "DeployerLost", "Cancelled")
)


@dataclass(frozen=True)
class Sizes:
    reps: int  # repetitions behind each median
    rebuild_events: int  # figure 1: size of the generated log
    idle_big_events: int  # figure 5: the long history (a prefix of the same log)
    command_configs: int  # figure 2
    command_ops: int
    cli_reps: int  # figure 3
    latency_samples: int  # figure 4
    idle_passes: int  # figure 5, per repetition and home
    e2e_rollouts: int  # figure 6, per run
    rss_rollouts: int  # figure 7
    rss_configs: int
    rss_cap_s: float  # stop triggering after this long (the figure then says how many ran)
    heavy_reps: int  # repetitions of the long runs (rebuild, end to end)


QUICK = Sizes(
    reps=3,
    rebuild_events=20_000,
    idle_big_events=20_000,
    command_configs=40,
    command_ops=150,
    cli_reps=5,
    latency_samples=20,
    idle_passes=50,
    e2e_rollouts=30,
    rss_rollouts=500,
    rss_configs=40,
    rss_cap_s=20,
    heavy_reps=2,
)
FULL = Sizes(
    reps=5,
    rebuild_events=200_000,
    idle_big_events=100_000,
    command_configs=100,
    command_ops=800,
    cli_reps=15,
    latency_samples=100,
    idle_passes=200,
    e2e_rollouts=150,
    rss_rollouts=40_000,  # issue #49; at ~110-200 rollouts/s, 200-360 s
    rss_configs=200,
    rss_cap_s=600,
    heavy_reps=3,
)


def home_env(home: Path) -> dict[str, str]:
    """The environment a user's command runs in, on `home` (no other ROLLOUTS_ setting of ours)."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("ROLLOUTS_")}
    return {**kept, "ROLLOUTS_HOME": str(home), "ROLLOUTS_ACTOR": ACTOR}


def meta() -> dict[str, Any]:
    return {"actor": ACTOR, "correlation_id": os.urandom(8).hex()}


class Workspace:
    """Temporary homes, and every process started for them; `close()` ends all of it."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="rollouts-bench-"))
        shm = Path("/dev/shm")
        # The generated log is only input: build it where fsync is free, then copy it to disk.
        self.scratch = Path(tempfile.mkdtemp(prefix="rollouts-bench-", dir=shm if shm.is_dir() else None))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.count = 0

    def home(self, label: str) -> Home:
        self.count += 1
        return Home(self.root / f"{self.count:02d}-{label}").ensure()

    def env(self, home: Home) -> dict[str, str]:
        return home_env(home.path)

    def controller(self, home: Home, interval: float) -> subprocess.Popen[bytes]:
        argv = [*ROLLOUTS, "controller", "run", "--interval", str(interval), "-q"]
        errlog = home.path / f"controller-{len(self.procs)}.err"
        with open(errlog, "wb") as log:
            proc = subprocess.Popen(argv, env=self.env(home), cwd=home.path, stdin=subprocess.DEVNULL, stderr=log)
        proc.errlog = errlog  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc in self.procs:
            self.procs.remove(proc)

    def close(self) -> None:
        for proc in list(self.procs):
            self.stop(proc)
        self._kill_strays()
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def _kill_strays(self) -> None:
        """Shims and deployers still running for one of our homes (detached; found by their argv)."""
        marker = str(self.root).encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker in cmdline:
                with contextlib.suppress(OSError):
                    os.kill(int(entry), signal.SIGKILL)


def check_alive(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        if proc.poll() is not None:
            errlog = getattr(proc, "errlog", None)
            tail = errlog.read_text()[-500:] if errlog and errlog.exists() else ""
            raise RuntimeError(f"controller {proc.pid} exited with {proc.returncode}: {tail}")


def stamp_time(stamp: Path, label: str, controller: subprocess.Popen[bytes]) -> float:
    """The time a deployer wrote into `stamp` (its first act), waited for up to 30 s while the controller lives."""
    deadline = time.monotonic() + 30
    while not stamp.exists() or not stamp.read_text():
        if time.monotonic() > deadline:
            raise RuntimeError(f"no deployer ran for {label} within 30 s")
        check_alive(controller)
        time.sleep(0.001)
    return float(stamp.read_text())


def make_configs(app: Any, prefix: str, count: int, spec: Spec) -> list[str]:
    names = [f"{prefix}-{i}" for i in range(count)]
    for name in names:
        app.create_config(name, spec, meta())
    return names


class Terminal:
    """Follows the log for deployments reaching a terminal event (originator ids, as str)."""

    def __init__(self, app: Any) -> None:
        self.recorder = app.recorder
        self.after = self.recorder.max_notification_id() or 0
        self.outcomes: dict[str, str] = {}

    def poll(self) -> list[str]:
        new = []
        while True:
            batch = self.recorder.select_notifications(
                start=self.after, limit=500, topics=TERMINAL_TOPICS, inclusive_of_start=False
            )
            for n in batch:
                key = str(n.originator_id)
                if key not in self.outcomes:
                    new.append(key)
                self.outcomes[key] = n.topic.rpartition(".")[2]
            if batch:
                self.after = batch[-1].id
            if len(batch) < 500:
                return new

    def wait(self, keys: set[str], timeout: float, *procs: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + timeout
        while not keys <= self.outcomes.keys():
            if time.monotonic() > deadline:
                missing = len(keys - self.outcomes.keys())
                raise RuntimeError(f"{missing} deployments not terminal after {timeout:.0f} s")
            check_alive(*procs)
            time.sleep(0.01)
            self.poll()


def deployment_key(config: str, revision: int) -> str:
    return str(ids.deployment_id(ids.config_id(config), revision))


class Job(Protocol):
    """A long run that leaves evidence in `tmp` (bench/chaos/run.py's Chaos, bench/nemesis/run.py's Nemesis)."""

    tmp: Path
    keep: bool

    def run(self) -> int: ...

    def cleanup(self) -> None: ...


def run_keeping_evidence(name: str, job: Job) -> int:
    """`job.run()`'s exit code (130 when interrupted, SIGTERM included; 2 on an error, its traceback
    printed); then, whatever happened and with signals ignored, its cleanup, and its evidence kept when
    `job.keep` says so, else removed."""

    def terminate(signum: int, _: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    code = 2
    try:
        code = job.run()
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        code = 130
    except Exception as error:  # noqa: BLE001 - report, clean up, keep the evidence
        import traceback

        traceback.print_exc()
        print(f"{name}: error: {error}", file=sys.stderr)
        code = 2
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        job.cleanup()
        if job.keep:
            print(f"{name}: evidence kept in {job.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(job.tmp, ignore_errors=True)
    return code
