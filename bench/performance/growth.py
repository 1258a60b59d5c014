#!/usr/bin/env python
"""The same commands on a log twice as long: CLI wall time and peak memory, 2M events against 1M (issue #49).

    python bench/performance/growth.py                      # 1,000,000 vs 2,000,000 events (generated once, cached)
    python bench/performance/growth.py --quick              # 100,000 vs 200,000 events, fewer runs
    python bench/performance/growth.py --small 200000 --large 400000 --runs 5 --part cli

Both logs are bench/performance/generate.py's (cached_log, 300 configs), each copied into a scratch home of
its own (events.db only, as audit.py's: the cache is shared and never written here). Measured on both homes,
the sizes interleaved (which goes first alternates), the value at --large against the same at --small:
  cli: the wall time of `rollouts rollout status NAME`, `rollout history NAME -o json` and `rollout latest
       NAME --supersede` (most generated configs have an open deployment, where a plain `latest` is refused;
       a paused NAME is resumed first, untimed), each a process of its own, on a home whose views were caught
       up first (`rollouts projections rebuild` and one run of each command, untimed). NAME is another
       config each run, the same names at both sizes. Median of --runs runs each; goal <= 1.1x.
  rss: the peak memory of `rollouts projections rebuild` into an empty projections folder (as rebuild.py
       rebuilds: the whole fold) and of `rollouts audit` (on views rebuilt, as audit.py's): the sum of VmRSS
       over the process and all its descendants (the workers it forks), sampled every 10 ms, the largest
       sum seen. Each process's own VmHWM, last read before it ended, is kept beside it. Median of --rss-runs
       runs each; goal <= 1.2x.
The last line of output is one JSON document.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from bench.performance.generate import cached_log  # noqa: E402
from bench.shared.harness import ROLLOUTS  # noqa: E402
from bench.shared.harness import home_env as env  # noqa: E402

CLI_GOAL = 1.1
RSS_GOAL = 1.2
SAMPLE_S = 0.01
COMMANDS = {  # figure name -> the command's arguments after `rollouts rollout`, NAME last
    "status": ("status",),
    "history_json": ("history", "-o", "json"),
    "latest": ("latest", "--supersede"),
}
HEAVY = {"rebuild": ("projections", "rebuild"), "audit": ("audit",)}


# -- homes ---------------------------------------------------------------------------------------


def rollouts(home: Path, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    """`rollouts ARGS` on `home`, untimed; an exit code not in `ok` ends the bench."""
    done = subprocess.run([*ROLLOUTS, *args], env=env(home), capture_output=True, text=True, check=False)
    if done.returncode not in ok:
        said = (done.stdout + done.stderr)[-500:]
        raise SystemExit(f"rollouts {' '.join(args)} exited {done.returncode}: {said}")
    return done


def scratch_home(events: int, configs: int, root: Path) -> Path:
    """A home under `root` holding a copy of the cached log of `events` events (its views not built)."""
    cached = cached_log(events, configs, False).path
    home = root / f"home-{events}"
    home.mkdir()
    for path in cached.glob("events.db*"):
        shutil.copy2(path, home / path.name)
    return home


# -- the CLI's wall time -------------------------------------------------------------------------


def wall(home: Path, argv: list[str], ok: tuple[int, ...]) -> float:
    """One command as a process of its own: its wall time, start to exit (s)."""
    t = time.perf_counter()
    done = subprocess.run(argv, env=env(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - t
    if done.returncode not in ok:
        raise SystemExit(f"{argv} exited {done.returncode}: {done.stderr.decode()[-300:]}")
    return elapsed


def unpaused(home: Path, names: list[str]) -> None:
    """Resume those of `names` that are paused, untimed (a paused config refuses `latest`)."""
    paused = {c["name"] for c in json.loads(rollouts(home, "config", "list", "-o", "json").stdout) if c["paused"]}
    for name in sorted(paused.intersection(names)):
        rollouts(home, "rollout", "resume", name)


def cli_times(homes: dict[int, Path], names: list[str]) -> dict[str, dict[int, list[float]]]:
    """Seconds of each command (COMMANDS) at each size, once per name after the first, which warms up."""
    for home in homes.values():
        unpaused(home, names)
    times: dict[str, dict[int, list[float]]] = {c: {size: [] for size in homes} for c in COMMANDS}
    for i, name in enumerate(names):
        order = list(homes) if i % 2 else list(reversed(homes))
        for command, args in COMMANDS.items():
            ok = (0,) if command == "latest" else (0, 1, 4)  # status: 1 when NAME's latest failed, 4 if none
            for size in order:
                spent = wall(homes[size], [*ROLLOUTS, "rollout", *args, name], ok)
                if i:
                    times[command][size].append(spent)
        print(f"  cli run {i}/{len(names) - 1} ({name}) done", file=sys.stderr, flush=True)
    return times


# -- peak memory of a process tree ---------------------------------------------------------------


def status_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of `pid`, in KiB (empty once it is gone, or a zombie)."""
    found = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
    return found


def descendants(pid: int) -> list[int]:
    """`pid` and every process under it (/proc/PID/task/TID/children, walked down)."""
    found, todo = [], [pid]
    while todo:
        at = todo.pop()
        found.append(at)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{at}/task"):
                todo += [int(c) for c in Path(f"/proc/{at}/task/{task}/children").read_text().split()]
    return found


@dataclass
class Peak:
    """One process's run: its wall time, the largest summed VmRSS of its process tree, each process's VmHWM."""

    seconds: float = 0.0
    peak_kib: int = 0
    hwm_kib: dict[int, int] = field(default_factory=dict)  # pid -> its VmHWM, as last read before it ended
    maxrss_kib: int = 0  # wait4's ru_maxrss: the largest of the process's own and its reaped children's
    code: int = 0  # its exit code
    output: str = ""  # its stdout and stderr

    def note(self) -> str:
        own = ", ".join(f"{kib / 1024:.0f}" for kib in sorted(self.hwm_kib.values(), reverse=True))
        return f"{len(self.hwm_kib)} process{'es' if len(self.hwm_kib) != 1 else ''}, VmHWM {own} MiB"


def tree_peak(argv: list[str], environ: dict[str, str] | None = None) -> Peak:
    """Run `argv` to its end, summing the VmRSS of it and all its descendants every SAMPLE_S: the largest sum."""
    run = Peak()
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        proc = subprocess.Popen(argv, env=environ, stdout=out, stderr=subprocess.STDOUT)
        while True:
            total = 0
            for pid in descendants(proc.pid):
                found = status_kib(pid)
                total += found.get("VmRSS", 0)
                if "VmHWM" in found:
                    run.hwm_kib[pid] = found["VmHWM"]
            run.peak_kib = max(run.peak_kib, total)
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)  # (not proc.wait: its rusage is wanted)
            if pid:
                break
            time.sleep(SAMPLE_S)
        run.seconds = time.perf_counter() - t
        run.code = proc.returncode = os.waitstatus_to_exitcode(status)
        run.maxrss_kib = usage.ru_maxrss
        out.seek(0)
        run.output = out.read().decode(errors="replace")
    return run


def peak_rss(home: Path, args: tuple[str, ...]) -> Peak:
    """`rollouts ARGS` on `home`, its process tree's memory sampled (an audit must say ok)."""
    run = tree_peak([*ROLLOUTS, *args], env(home))
    if run.code != 0 or (args[0] == "audit" and not run.output.startswith("ok:")):
        raise SystemExit(f"rollouts {' '.join(args)} exited {run.code}: {run.output[-500:]}")
    return run


def rebuilt_to(run: Peak) -> int:
    """The position a `projections rebuild` says every view reached (the log's head)."""
    positions = {int(p) for p in re.findall(r"^rebuilt \S+ to position (\d+)", run.output, re.MULTILINE)}
    if len(positions) != 1:
        raise SystemExit(f"projections rebuild said {run.output[-300:]!r}")
    return positions.pop()


def rss_runs(homes: dict[int, Path], runs: int) -> dict[str, dict[int, list[Peak]]]:
    """Each HEAVY command's runs at each size: a rebuild into an empty projections folder (of the whole log),
    then an audit on the views it made."""
    found: dict[str, dict[int, list[Peak]]] = {c: {size: [] for size in homes} for c in HEAVY}
    for i in range(runs):
        for size in list(homes) if i % 2 == 0 else list(reversed(homes)):
            shutil.rmtree(homes[size] / "projections", ignore_errors=True)
            for command, args in HEAVY.items():
                run = peak_rss(homes[size], args)
                if command == "rebuild" and rebuilt_to(run) < size:
                    raise SystemExit(f"the rebuild at {size:,} events stopped at {rebuilt_to(run):,}")
                found[command][size].append(run)
                print(
                    f"  {command} at {size:,} events: {run.seconds:.1f} s, peak {run.peak_kib / 1024:.0f} MiB"
                    f" ({run.note()}; ru_maxrss {run.maxrss_kib / 1024:.0f} MiB)",
                    file=sys.stderr,
                    flush=True,
                )
    return found


# -- figures -------------------------------------------------------------------------------------


def ratio_figure(small: list[float], large: list[float], goal: float, unit: str) -> dict[str, Any]:
    """{value, baseline, ratio, goal, ok, runs}: the medians at the larger log and at the smaller."""
    value, baseline = statistics.median(large), statistics.median(small)
    return {
        "value": round(value, 2),
        "baseline": round(baseline, 2),
        "ratio": round(value / baseline, 3),
        "goal": f"<={goal}x",
        "ok": value / baseline <= goal,
        "unit": unit,
        "runs": {"large": [round(v, 2) for v in large], "small": [round(v, 2) for v in small]},
    }


def cli_figures(homes: dict[int, Path], runs: int, configs: int, built: bool) -> dict[str, Any]:
    """The CLI part's figures; `built`: the homes' views are at the head already (else rebuilt first, untimed)."""
    small, large = sorted(homes)
    for home in homes.values() if not built else ():
        rollouts(home, "projections", "rebuild")
    names = [f"svc-{(i * 37) % configs:03d}" for i in range(runs + 1)]
    times = cli_times(homes, names)
    return {
        command: ratio_figure([t * 1000 for t in t_[small]], [t * 1000 for t in t_[large]], CLI_GOAL, "ms")
        for command, t_ in times.items()
    }


def rss_figures(homes: dict[int, Path], runs: int) -> dict[str, Any]:
    """The peak memory part's figures (MiB), with a note of each process's own peak in the last run."""
    small, large = sorted(homes)
    found = rss_runs(homes, runs)
    figures = {}
    for command, by_size in found.items():
        peaks = {size: [r.peak_kib / 1024 for r in by_size[size]] for size in homes}
        figure = ratio_figure(peaks[small], peaks[large], RSS_GOAL, "MiB")
        last = {size: by_size[size][-1] for size in homes}
        figure["note"] = "; ".join(f"{size:,} events: {last[size].note()} (last run)" for size in (small, large))
        figure["seconds"] = {size: round(statistics.median(r.seconds for r in by_size[size]), 1) for size in homes}
        figures[command] = figure
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=1_000_000, help="the baseline's log (default 1,000,000)")
    parser.add_argument("--large", type=int, default=2_000_000, help="the measured log (default 2,000,000)")
    parser.add_argument("--quick", action="store_true", help="100,000 vs 200,000 events, 5 CLI runs, 2 RSS runs")
    parser.add_argument("--configs", type=int, default=300, help="configs in the generated history")
    parser.add_argument("--runs", type=int, default=9, help="CLI runs of each command at each size (median)")
    parser.add_argument("--rss-runs", type=int, default=3, help="peak memory runs of each command at each size")
    parser.add_argument("--part", choices=("cli", "rss"), help="measure only this part (default: both)")
    args = parser.parse_args(argv)
    if args.quick:
        args.small, args.large, args.runs, args.rss_runs = 100_000, 200_000, 5, 2
    root = Path(tempfile.mkdtemp(prefix="rollouts-bench-growth-"))
    try:
        homes = {size: scratch_home(size, args.configs, root) for size in (args.small, args.large)}
        result: dict[str, Any] = {"bench": "growth", "small": args.small, "large": args.large, "configs": args.configs}
        if args.part in (None, "rss"):  # first: the CLI's `latest` writes events
            result["rss"] = rss_figures(homes, args.rss_runs)
        if args.part in (None, "cli"):
            result["cli"] = cli_figures(homes, args.runs, args.configs, built="rss" in result)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for part in ("rss", "cli"):
        for command, f in result.get(part, {}).items():
            verdict = "OK" if f["ok"] else "BELOW GOAL"
            print(
                f"{part} {command}: {f['value']:,.1f} {f['unit']} at {args.large:,} events vs {f['baseline']:,.1f}"
                f" at {args.small:,}: {f['ratio']:.3f}x (goal {f['goal']}): {verdict}"
            )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
