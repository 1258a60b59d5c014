#!/usr/bin/env python
"""The CPU time of a command and of every process it starts, detached ones included (root, Linux).

    python bench/shared/cpu_of.py [--postmaster PID] -- python bench/chaos/run.py --seed 1 --rollouts 300 --scale

A chaos run's deployer shims leave its process tree (their own session, reparented to init), so
neither `time` nor getrusage counts them. This runs the command in a cgroup of its own (cgroup v1
`cpuacct`, as on the development machine), whose every descendant stays in it, and prints on stderr
the wall time and the CPU seconds of the whole group. With `--postmaster PID` it also prints the CPU
that PostgreSQL's processes used meanwhile (the postmaster, the backends it reaped and those still
alive: other clients of that server count too). Exit status: the command's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def postgres_seconds(postmaster: int) -> float:
    """CPU of the postmaster, of the children it reaped, and of the children alive now."""
    ticks = os.sysconf("SC_CLK_TCK")

    def fields(pid: int | str) -> list[str]:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()

    own = fields(postmaster)
    total = sum(int(x) for x in own[11:15])  # utime stime cutime cstime
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            f = fields(pid)
        except OSError:
            continue
        if int(f[1]) == postmaster:
            total += int(f[11]) + int(f[12])
    return total / ticks


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--postmaster", type=int, help="also count this PostgreSQL server's CPU meanwhile")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command given")
    if not (CPUACCT / "cgroup.procs").exists():
        p.error(f"no cgroup v1 cpuacct hierarchy at {CPUACCT}")
    group = CPUACCT / f"rollouts-bench-{os.getpid()}"
    group.mkdir()
    pg_before = postgres_seconds(args.postmaster) if args.postmaster else 0.0
    started = time.monotonic()
    try:
        proc = subprocess.Popen(command, preexec_fn=lambda: (group / "cgroup.procs").write_text("0"))
        code = proc.wait()
    except KeyboardInterrupt:
        code = 130
    wall = time.monotonic() - started
    time.sleep(1)  # what the run left behind has ended, or is moved out below
    cpu = int((group / "cpuacct.usage").read_text()) / 1e9
    left = (group / "cgroup.procs").read_text().split()
    for pid in left:  # still running: counted so far, moved back to the root group so the group can go
        (CPUACCT / "cgroup.procs").write_text(pid)
    group.rmdir()
    line = f"cpu_of: exit {code}, wall {wall:.1f} s, cpu {cpu:.1f} s (processes left running: {len(left)})"
    if args.postmaster:
        line += f", postgres {postgres_seconds(args.postmaster) - pg_before:.1f} s"
    print(line, file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
