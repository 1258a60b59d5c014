#!/usr/bin/env python
"""`rollout latest NAME --supersede` at 2M events against 1M, with the log's pages out of the OS page cache
and in it (issue #49's figure 17 asks <= 1.1x; growth.py measures the pages as a long run leaves them).

    python bench/performance/page_cache.py                  # 1,000,000 vs 2,000,000 events, 5 runs
    python bench/performance/page_cache.py --small 100000 --large 200000 --runs 3

A command loads NAME's config from its events alone (no snapshots: deciding.py), and a config's events lie
one to a page among every other stream's: ~1,200 of them at 1M events (300 configs), ~2,400 at 2M. When
those pages are in the page cache, the load is the fold's CPU; when they are not, it is as many reads from
the disk. On the machines this project is built on the kernel pages out what a file has not touched for a
minute (DAMON's reclaim, `pageout` at ~60 s): a command after a pause finds them cold. Cold: each home's
events.db is dropped from the page cache (posix_fadvise DONTNEED) before each command; warm: read whole
first. Another config each run, the same names at both sizes; the median of --runs. The last line of
output is one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from bench.performance.growth import rollouts, scratch_home, unpaused, wall  # noqa: E402
from bench.shared.harness import ROLLOUTS  # noqa: E402


def cold(path: Path) -> None:
    """`path`'s pages out of the page cache (written ones first: DONTNEED drops clean pages only)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm(path: Path) -> None:
    """`path` read whole: its pages in the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1_000_000, help="the baseline's log (default 1,000,000)")
    parser.add_argument("--large", type=int, default=2_000_000, help="the measured log (default 2,000,000)")
    parser.add_argument("--configs", type=int, default=300, help="configs in the generated history")
    parser.add_argument("--runs", type=int, default=5, help="commands at each size and cache state (median)")
    args = parser.parse_args(argv)
    names = [f"svc-{(i * 37) % args.configs:03d}" for i in range(2 * args.runs + 1)]  # as growth.py names them
    with tempfile.TemporaryDirectory(prefix="rollouts-page-cache-") as root:
        homes = {size: scratch_home(size, args.configs, Path(root)) for size in (args.small, args.large)}
        for home in homes.values():
            unpaused(home, names)
            rollouts(home, "rollout", "latest", names[-1], "--supersede")  # imports compiled, untimed
        times: dict[tuple[str, int], list[float]] = {}
        for i in range(args.runs):
            for state, prepare in (("cold", cold), ("warm", warm)):
                name = names[2 * i + (state == "warm")]
                for size in (args.small, args.large) if i % 2 else (args.large, args.small):
                    prepare(homes[size] / "events.db")
                    spent = wall(homes[size], [*ROLLOUTS, "rollout", "latest", name, "--supersede"], (0,))
                    times.setdefault((state, size), []).append(spent)
            print(f"  run {i + 1}/{args.runs} done", file=sys.stderr, flush=True)
    result: dict[str, object] = {"bench": "page_cache", "small": args.small, "large": args.large}
    for state in ("cold", "warm"):
        small, large = (statistics.median(times[state, size]) * 1000 for size in (args.small, args.large))
        print(
            f"latest --supersede, pages {state}: {large:.0f} ms at {args.large:,} vs {small:.0f} at {args.small:,}:"
            f" {large / small:.2f}x"
        )
        runs = {size: [round(t * 1000) for t in times[state, size]] for size in (args.small, args.large)}
        result[state] = {
            "value": round(large, 1),
            "baseline": round(small, 1),
            "ratio": round(large / small, 3),
            "runs_ms": runs,
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"took {time.perf_counter() - started:.0f} s", file=sys.stderr)
    sys.exit(code)
