#!/usr/bin/env python
"""Figure 16: the controller's own CPU time per template measurement (DESIGN 7.9, goal <= 30 ms).

    python bench/performance/template_cost.py [--rollouts 20] [--count 5] [--reps 3]

One controller (`controller run --interval 0.05 -q`, a process of its own, warmed up first) rolls out
ROLLOUTS configs at once, each naming a command template of COUNT measurements at interval 0 (`true`);
then, in a home of its own, the same configs without the template. The controller's CPU (its own utime +
stime from /proc, and its shims' fork server's own; not what they reaped: the shims, the measurements and
deployers are processes of their own) is read
before the rollouts are triggered and once every one has ended. The figure is the difference of the two
runs divided by the measurements the first made (ROLLOUTS x COUNT): what a measurement adds to the
controller's work, its claim, create, report and record, the process itself excluded. Medians of REPS
pairs, interleaved.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from bench.performance.figures import Figure, median  # noqa: E402
from bench.performance.processes import warm_up  # noqa: E402
from bench.performance.steps import wait_ended  # noqa: E402
from bench.shared.harness import Sizes, Terminal, Workspace, make_configs, meta  # noqa: E402
from rollouts.adapters.service import analysis  # noqa: E402
from rollouts.adapters.service.bootstrap import open_app  # noqa: E402
from rollouts.domain import ids  # noqa: E402
from rollouts.domain.analysis import TemplateSpec  # noqa: E402
from rollouts.domain.spec import Spec  # noqa: E402

TEMPLATE = "bench-cmd"


def cpu_seconds(pid: int) -> float:
    """The controller's own user + system CPU and that of its live children (its shims' fork server), each
    its own only: what they reaped (shims, and so the measurements) is not counted. From /proc."""

    def stat(of: int | str) -> list[str]:
        return Path(f"/proc/{of}/stat").read_text().rsplit(")", 1)[1].split()

    ticks = 0
    for found in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = stat(found)
        except OSError:  # (gone meanwhile)
            continue
        if int(found) == pid or int(fields[1]) == pid:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def controller_cpu(ws: Workspace, rollouts: int, count: int) -> tuple[float, float]:
    """(seconds of the controller's CPU, seconds of wall time) for `rollouts` configs at once, each naming a
    command template of `count` measurements (0: no template)."""
    home = ws.home(f"tmplcost{count}")
    app = open_app(home, None)
    spec = Spec(command=["true"])
    if count:
        template = TemplateSpec(provider="command", command=["true"], count=count, interval=0)
        analysis.create(app, TEMPLATE, template, None, meta())  # type: ignore[arg-type]
        spec = Spec(command=["true"], analysis=[TEMPLATE])
    names = make_configs(app, "cost", rollouts, spec)
    proc = ws.controller(home, 0.05)
    try:
        warm_up(home, app, Terminal(app), [proc])
        after = app.recorder.max_notification_id() or 0
        before, started = cpu_seconds(proc.pid), time.perf_counter()
        for name in names:
            app.latest(name, None, False, meta())
        ended = wait_ended(app, {str(ids.config_id(n)) for n in names}, after, 600, proc)
        used, elapsed = cpu_seconds(proc.pid) - before, time.perf_counter() - started
        failed = [c for c, phase in ended.items() if phase != "Complete"]
        if failed:
            raise RuntimeError(f"{len(failed)} of {rollouts} rollouts did not complete")
    finally:
        ws.stop(proc)
        app.close()
    return used, elapsed


def per_measurement_ms(ws: Workspace, rollouts: int, count: int, reps: int) -> tuple[float, str]:
    """The median over `reps` interleaved pairs of (CPU with templates - CPU without) / measurements, in ms."""
    found, notes = [], []
    for _ in range(reps):
        with_cpu, with_wall = controller_cpu(ws, rollouts, count)
        plain_cpu, plain_wall = controller_cpu(ws, rollouts, 0)
        found.append((with_cpu - plain_cpu) / (rollouts * count) * 1000)
        notes.append(f"{with_cpu:.2f} s ({with_wall:.1f} s wall) vs {plain_cpu:.2f} s ({plain_wall:.1f} s)")
    note = f"{rollouts} rollouts x {count} measurements; controller CPU with vs without: {'; '.join(notes)}"
    return median(found), note


def bench_template_cost(ws: Workspace, sizes: Sizes) -> list[Figure]:
    """bench/run.py's figure 16."""
    value, note = per_measurement_ms(ws, 20, 5, max(1, sizes.heavy_reps))
    label = "16 controller CPU per template measurement (command, interval 0), minus the same without"
    return [Figure("template_measurement_cpu_ms", label, "ms", value, None, "<=30", note=note)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=20)
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    ws = Workspace()
    try:
        value, note = per_measurement_ms(ws, args.rollouts, args.count, args.reps)
    finally:
        ws.close()
    print(f"controller CPU per template measurement: {value:.1f} ms (goal <= 30 ms); {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
