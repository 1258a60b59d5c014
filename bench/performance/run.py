#!/usr/bin/env python
"""Rollouts benchmarks: each figure beside a baseline measured in the same run, as a ratio.

    python bench/run.py [--quick] [--json]

Figures (DESIGN sections 5-9; every value and baseline is a median of several runs):

1. rebuild        projection rebuild (all three read models) events/s vs eventsourcing's own
                  read + decode of the same log (select_notifications + mapper.to_domain_event),
                  both timed by rebuild.py's ceiling() and rebuild(), on generate.py's log (in bench/performance/)
2. commands       in-process `RolloutsApp.latest(supersede)` ops/s vs a bare eventsourcing
                  load-command-save loop on a trivial aggregate, same SQLite settings
3. cli_*          wall time of `rollouts rollout latest`, `rollout history -o json` (goal <= 1.1x), `--help`
                  vs `python -c "import eventsourcing.application, pydantic, click, sqlite_utils"`
4. spawn_latency  `latest` committed -> deployer running (its first act writes time.time()),
                  with `controller run --interval 0.01 -q` running; median and p99
4b. promotion_latency  an upstream revision eligible (its Complete event) -> the auto stage's deployer
                  running, with `--interval 0.1` (7.10; goal: the interval + 100 ms; bench/performance/promotion.py)
5. idle_reconcile one idle `Controller.reconcile()` with a long history vs with 1k events
6. e2e            rollouts/s, one controller and `true` deployers; then two controllers; then (12) configs
                   of 3 steps x 2 measurements vs the steps floor, their 9 processes each through the runtime
                   alone (bench/performance/steps_floor.py), and the controller's own time per measurement
7. rss            controller VmRSS at the start and at the end of a long run of rollouts (40,000; stopped at
                  600 s, then said CAPPED)
8. chain          in-process `latest --supersede` ops/s on the hash-chained recorder vs the
                  library's plain SQLite recorder (bench/performance/chain.py)
9. log_verify     `log verify` events/s over figure 1's log vs reading the same rows and hashing
                  their stored bytes with hashlib, in a process of its own (bench/performance/chain.py; at 1M:
                  python bench/performance/chain.py)
10. pg_*          on the PostgreSQL server of `--store` (default: the local test server), each in
                  schemas of its own (bench/performance/postgres.py): `latest --supersede` ops/s vs a bare
                  eventsourcing loop; latest -> deployer running (LISTEN/NOTIFY), median and p99;
                  end-to-end rollouts/s, one controller (and as a ratio to
                  figure 6's, when both run: goal >= 0.9x); rebuild vs the library's read + decode;
                  `claim check` as a deployer runs it vs a Python process's connect + select 1.
                  No server reachable: printed as skipped, never ok
11. *_10k         one controller pass with 10,000 configs vs the same with 100: idle, and busy
                  (open deployments another live controller holds: 1,000 vs 100), per deployment
1m, 13, 14        at the sizes issue #34 names (bench/performance/at_scale.py runs each script as a process):
                  rebuild of 1M events vs the library's read + decode (bench/performance/rebuild.py); the whole
                  `rollouts audit` of 1M events vs the same, >= 0.6x (bench/performance/audit.py); /metrics after
                  one new event, p50 and p99, and made from nothing, at 1M events and 1,000 configs, vs the
                  CLI's in-process `rollout history NAME -o json` (bench/performance/serve.py). `--quick`: small
15. measure_*     the prometheus measurement process as the controller starts it (`python -m rollouts measure
                  --resolved`) vs `python -c` importing urllib3 and making the same query (bench/performance/measure.py)
16. template_*    the controller's own CPU per template measurement: configs naming a command template of 5
                  measurements at interval 0, minus the same configs without it, per measurement
                  (bench/performance/template_cost.py)
17. cli_2m_*      wall time of `rollout status NAME`, `rollout history NAME -o json` and `rollout latest NAME
                  --supersede` as processes on generate.py's log of 2M events (300 configs) vs the same at 1M,
                  views caught up first (bench/performance/growth.py, run by at_scale.py); goal <= 1.1x.
                  `--quick`: 200k vs 100k
18. peak_rss_2m_* peak RSS of `rollouts projections rebuild` and of `rollouts audit` at 2M events vs at 1M: the
                  sum of VmRSS over the process and its workers, sampled every 10 ms (growth.py); goal <= 1.2x

`--json` prints {"name": {"value", "baseline", "ratio", "goal", "ok"}} as the last line.
The figures are measured in bench/performance/: in_process.py (1, 2, 8, 9), processes.py (3, 4, 6, 7, with
steps.py's 12), passes.py (5, 11) and postgres.py (10), on the logs of histories.py, in
bench/shared/harness.py's workspace, and by the scripts at_scale.py runs (1m, 13, 14, 17, 18) on
generate.py's cached logs; figures.py holds the results and prints them.
Everything runs in temporary homes; every process started here is stopped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])
# The processes timed here run as an installed copy does, from cached bytecode: with the
# PYTHONDONTWRITEBYTECODE that some sandboxes set, each would compile the project's modules again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

from bench.performance.at_scale import (  # noqa: E402
    bench_audit_at_scale,
    bench_cli_growth,
    bench_rebuild_at_scale,
    bench_rss_growth,
    bench_serve_at_scale,
)
from bench.performance.figures import Figure, pg_against_sqlite, print_table  # noqa: E402
from bench.performance.histories import build_logs  # noqa: E402
from bench.performance.in_process import bench_chain_append, bench_commands, bench_rebuild, bench_verify  # noqa: E402
from bench.performance.measure import bench_measure  # noqa: E402
from bench.performance.passes import bench_idle, bench_scale  # noqa: E402
from bench.performance.processes import bench_cli, bench_e2e, bench_latency, bench_rss  # noqa: E402
from bench.performance.promotion import bench_promotion_latency  # noqa: E402
from bench.performance.template_cost import bench_template_cost  # noqa: E402
from bench.shared.harness import FULL, QUICK, Workspace  # noqa: E402

# -- figure 10: PostgreSQL (bench/performance/postgres.py) ---------------------------------------------------

PG_FIGURES = (
    ("pg_command_ops_per_s", "10 PG latest --supersede, in-process, vs bare eventsourcing", "op/s", ">=0.5x"),
    ("pg_spawn_latency_median_ms", "10 PG latest -> deployer running, median", "ms", "<=50"),
    ("pg_spawn_latency_p99_ms", "10 PG latest -> deployer running, p99", "ms", "<=300"),
    ("pg_e2e_rollouts_per_s", "10 PG end to end, 1 controller", "/s", ">=100"),
    ("pg_rebuild_events_per_s", "10 PG rebuild, all projections, vs library read + decode", "ev/s", ">=0.8x"),
    ("pg_claim_check_ms", "10 PG `claim check` process vs psycopg connect + select 1", "ms", "<=1.2x"),
)


def bench_postgres(store: str, quick: bool) -> list[Figure]:
    from bench.performance import postgres

    why = postgres.reachable(store)
    if why is not None:
        return [
            Figure(n, label, unit, math.nan, None, goal, skipped=f"no server: {why}")
            for n, label, unit, goal in PG_FIGURES
        ]
    found = postgres.run_all(store, quick)
    return [
        Figure(n, label, unit, found[n]["value"], found[n]["baseline"], goal) for n, label, unit, goal in PG_FIGURES
    ]


@contextlib.contextmanager
def signals_end_cleanly() -> Iterator[None]:
    def stop(signum: int, _: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer and smaller runs (a few minutes)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object, last line")
    parser.add_argument(
        "--only",
        help="comma-separated sections: rebuild,commands,chain,cli,latency,promotion,idle,e2e,rss,measure,templates,"
        "pg,scale,rebuild1m,audit,serve,cli2m,rss2m",
    )
    parser.add_argument(
        "--store",
        default=os.environ.get("ROLLOUTS_BENCH_STORE", "postgresql://postgres@127.0.0.1:5432/test"),
        help="PostgreSQL server for the pg_ figures (schemas of their own, dropped after); skipped when unreachable",
    )
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    only = set(args.only.split(",")) if args.only else None
    started = time.perf_counter()
    figures: list[Figure] = []
    ws = Workspace()

    def log(text: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {text}", file=sys.stderr, flush=True)

    def wanted(section: str) -> bool:
        return only is None or section in only

    with signals_end_cleanly():
        try:
            if wanted("rebuild") or wanted("idle"):
                log(f"generating a log of {sizes.rebuild_events:,} events through bench/performance/generate.py")
                small, big, full, big_events = build_logs(ws, sizes)
                if wanted("rebuild"):
                    log("1 rebuild")
                    figures += bench_rebuild(ws, full, sizes)
                    log("9 log verify")
                    figures += bench_verify(full, sizes)
                if wanted("idle"):
                    log("5 idle reconcile")
                    figures += bench_idle(small, big, sizes, big_events)
            for section, bench in (
                ("commands", bench_commands),
                ("chain", bench_chain_append),
                ("cli", bench_cli),
                ("latency", bench_latency),
                ("promotion", bench_promotion_latency),
                ("e2e", bench_e2e),
                ("rss", bench_rss),
                ("measure", bench_measure),
                ("templates", bench_template_cost),
            ):
                if wanted(section):
                    log(section)
                    figures += bench(ws, sizes)
            if wanted("scale"):
                log("11 scale: 10k configs vs 100")
                figures += bench_scale(ws, sizes)
            if wanted("pg"):
                log(f"10 PostgreSQL ({args.store})")
                figures += bench_postgres(args.store, args.quick)
            for section, at_scale in (
                ("rebuild1m", bench_rebuild_at_scale),
                ("audit", bench_audit_at_scale),
                ("serve", bench_serve_at_scale),
                ("cli2m", bench_cli_growth),
                ("rss2m", bench_rss_growth),
            ):
                if wanted(section):
                    log(f"{section}: bench/performance/at_scale.py")
                    figures += at_scale(args.quick)
        finally:
            ws.close()
    figures += pg_against_sqlite(figures)
    figures.sort(key=lambda f: f.label)
    elapsed = time.perf_counter() - started
    print_table(figures, "quick" if args.quick else "full", elapsed)
    if args.json:
        print(json.dumps({f.name: f.as_json() for f in figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
