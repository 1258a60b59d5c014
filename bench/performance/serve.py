#!/usr/bin/env python
"""`rollouts serve` latency against the CLI's own `rollout history -o json`, on one generated log.

    python bench/performance/serve.py [--events 1000000] [--configs 1000] [--requests 200] [--starts 20]

A `rollouts serve --port 0` process answers `/api/configs/NAME/history` (NAME cycling over the
configs) and `/metrics` over one keep-alive connection, each `--requests` times: median and p99.
The log does not move meanwhile, so /metrics (`serve_metrics`) answers the text it made for the
first scrape. Then `metrics_after_event`: before each /metrics request (untimed) a real event
goes into the log, `rollout latest NAME --supersede` through the CLI in-process on the same
home (a paused NAME is resumed first), so every scrape sees the log moved (the bench checks
that the head it reports grew). `metrics_remade` is the first scrape: GET /metrics of a `rollouts
serve` just started, whose text is made from nothing, once per server (its connection made first,
untimed), `--starts` servers one after another, each scrape right after a run of the baseline (its
own baseline: those runs' median).
`metrics_remade_in_process` is the same text made anew in this process (`metrics_remade_ms`:
Exposition.forget, then routes.answer; no HTTP, views long open; the figure this bench reported as
`metrics_remade` before 2026-12-06's fourth session). The baseline is `rollout history NAME -o json`
run in-process (click's runner: no interpreter start-up), each run right after the request for the
same name.
The log is bench/performance/generate.py's (cached in /tmp, its views built there once); the bench runs on a
copy of that home, in a temporary folder, since it writes events.

Goals (DESIGN 7.5, issue #18): each median under 20 ms, and at most the CLI's median.
The last line is a JSON summary: {"name": {"median_ms", "p99_ms", "baseline_ms", "ratio", "goal", "ok"}}.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from click.testing import CliRunner

from rollouts.adapters.cli import cli
from rollouts.adapters.cli.errors import run as run_cli

ROOT = Path(__file__).resolve().parents[2]  # the checkout, where `bench` is
if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(ROOT)
from bench.performance.generate import cached_log  # noqa: E402

GOAL_MS = 20.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Cli:
    """`rollouts` in-process on one home (click's runner: no interpreter start-up)."""

    def __init__(self, home: Path) -> None:
        self.env = {"ROLLOUTS_HOME": str(home), "ROLLOUTS_ACTOR": "bench@serve"}

    def run(self, *args: str) -> tuple[int, str]:
        with CliRunner().isolation(env=self.env) as (out, err, _):
            return run_cli(cli, list(args)), err.getvalue().decode()[-300:]

    def history_ms(self, name: str) -> float:
        """`rollout history NAME -o json`: the baseline."""
        start = time.perf_counter()
        code, err = self.run("rollout", "history", name, "-o", "json")
        elapsed = (time.perf_counter() - start) * 1000
        if code != 0:
            raise SystemExit(f"rollout history {name} failed: {err}")
        return elapsed

    def new_event(self, name: str) -> None:
        """A new deployment of NAME in the log (resumed first when paused)."""
        code, err = self.run("rollout", "latest", name, "--supersede")
        if code != 0:
            self.run("rollout", "resume", name)
            code, err = self.run("rollout", "latest", name, "--supersede")
        if code != 0:
            raise SystemExit(f"rollout latest {name} failed: {err}")


def caught_up(home: Path) -> None:
    """Bring the home's views to the head of the log (a rebuild when they have not started yet)."""
    from rollouts.adapters.cli.state import State

    state = State(str(home), None, "bench@serve")
    try:
        state.read("history", "audit")
    finally:
        state.close()


def metrics_remade_ms(home: Path, times: int) -> list[float]:
    """In-process: the /metrics answer made anew from nothing (as at the first scrape)."""
    from rollouts.adapters.cli.state import State
    from rollouts.adapters.web import exposition, routes

    state = State(str(home), None, "bench@serve")
    made = exposition.Exposition(lambda: state.projections)
    spent = []
    try:
        for _ in range(times):
            made.forget()  # nothing of the last text is reused
            start = time.perf_counter()
            routes.answer(state, made, "/metrics")
            spent.append((time.perf_counter() - start) * 1000)
    finally:
        state.close()
    return spent


def first_scrapes_ms(home: Path, cli: Cli, names: list[str]) -> tuple[list[float], list[float]]:
    """GET /metrics of a server just started on `home`, once per name (a server each), right after
    the CLI's history of that name: (the scrapes' times, the CLI's). The connection is made first, untimed
    (as a scraper's is kept between scrapes)."""
    scrapes, baseline = [], []
    for name in names:
        server = Server(home)
        try:
            server.conn.connect()
            baseline.append(cli.history_ms(name))
            scrapes.append(server.get_ms("/metrics")[0])
        finally:
            server.stop()
    return scrapes, baseline


class Server:
    def __init__(self, home: Path) -> None:
        env = {**os.environ, "ROLLOUTS_HOME": str(home), "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rollouts", "serve", "--port", "0"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        ready, _, _ = select.select([self.proc.stdout], [], [], 120)
        if not ready:
            self.proc.kill()
            self.proc.communicate()
            raise SystemExit("serve printed no URL within 120 s")
        self.url = self.proc.stdout.readline().strip()  # type: ignore[union-attr]
        self.conn = http.client.HTTPConnection(urlsplit(self.url).netloc, timeout=60)

    def get_ms(self, path: str) -> tuple[float, bytes]:
        start = time.perf_counter()
        self.conn.request("GET", path)
        response = self.conn.getresponse()
        body = response.read()
        elapsed = (time.perf_counter() - start) * 1000
        if response.status != 200:
            raise SystemExit(f"GET {path}: {response.status} {body[:200]!r}")
        return elapsed, body

    def stop(self) -> None:
        self.conn.close()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=30)
        if self.proc.returncode != 0:
            raise SystemExit(f"serve exited {self.proc.returncode}")


HEAD = re.compile(rb"^rollouts_log_head_position (\S+)$", re.MULTILINE)


def metrics_after_event_ms(server: Server, cli: Cli, names: list[str]) -> list[float]:
    """GET /metrics right after a new event in the log, once per name: the server must see the log moved."""
    spent, head = [], _head(server.get_ms("/metrics")[1])
    for name in names:
        cli.new_event(name)
        elapsed, body = server.get_ms("/metrics")
        now = _head(body)
        if now <= head:
            raise SystemExit(f"/metrics reported head {now} after an event past {head}")
        spent.append(elapsed)
        head = now
    return spent


def _head(body: bytes) -> float:
    found = HEAD.search(body)
    if found is None:
        raise SystemExit("/metrics has no rollouts_log_head_position")
    return float(found.group(1))


def copied(home: Path) -> Path:
    """A copy of `home` in a new temporary folder (the cached one is never written)."""
    copy = Path(tempfile.mkdtemp(prefix="rollouts-bench-serve-")) / "home"
    shutil.copytree(home, copy, symlinks=True)
    return copy


def figure(times: list[float], baseline: float) -> dict[str, Any]:
    median = statistics.median(times)
    return {
        "median_ms": round(median, 2),
        "p99_ms": round(percentile(times, 0.99), 2),
        "baseline_ms": round(baseline, 2),
        "ratio": round(median / baseline, 3),
        "goal": f"median < {GOAL_MS:g} ms and <= the CLI's",
        "ok": median < GOAL_MS and median <= baseline,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="log size (default 1,000,000)")
    parser.add_argument("--configs", type=int, default=1000, help="configs in the generated history")
    parser.add_argument("--requests", type=int, default=200, help="requests per endpoint (and CLI runs)")
    parser.add_argument("--starts", type=int, default=20, help="servers started for their first scrape")
    args = parser.parse_args()

    cached = cached_log(args.events, args.configs, False).path
    names = [f"svc-{i % args.configs:03d}" for i in range(0, args.requests * 7, 7)]
    print(f"log: {cached} ({args.events:,} events, {args.configs} configs)", file=sys.stderr)
    t = time.perf_counter()
    caught_up(cached)  # once, outside any figure: a fresh log's views are built here
    print(f"views caught up in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    t = time.perf_counter()
    home = copied(cached)
    print(f"copied to {home} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    try:
        summary, baseline_times = measure(home, names, args.requests, args.starts)
    finally:
        shutil.rmtree(home.parent)
    print(f"{'figure':<26}{'median':>10}{'p99':>10}{'CLI median':>12}{'ratio':>8}  ok", file=sys.stderr)
    for name, f in summary.items():
        cells = f"{f['median_ms']:>8.2f}ms{f['p99_ms']:>8.2f}ms{f['baseline_ms']:>10.2f}ms{f['ratio']:>8.3f}"
        print(f"{name:<26}{cells}  {f['ok']}", file=sys.stderr)
    print(
        f"(CLI p99 {percentile(baseline_times, 0.99):.2f} ms; {args.events:,} events, {args.configs} configs)",
        file=sys.stderr,
    )
    sizes = {"events": args.events, "configs": args.configs, "requests": args.requests, "starts": args.starts}
    print(json.dumps(summary | sizes))


def measure(home: Path, names: list[str], requests: int, starts: int = 20) -> tuple[dict[str, Any], list[float]]:
    """Every figure on `home` (a copy: events are written), and the baseline's times."""
    t = time.perf_counter()
    server = Server(home)
    print(f"serve up at {server.url} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    cli = Cli(home)
    try:
        for name in names[:5]:  # warm: connections, page cache
            server.get_ms(f"/api/configs/{name}/history")
            cli.history_ms(name)
        # Interleaved, one of each per name: both see the same load on a shared machine.
        history, baseline_times = [], []
        for name in names:
            history.append(server.get_ms(f"/api/configs/{name}/history")[0])
            baseline_times.append(cli.history_ms(name))
        server.get_ms("/metrics")
        metrics = [server.get_ms("/metrics")[0] for _ in range(requests)]
        after_event = metrics_after_event_ms(server, cli, names)
    finally:
        server.stop()
    first, first_baseline = first_scrapes_ms(home, cli, names[:starts])
    remade = metrics_remade_ms(home, requests)
    baseline = statistics.median(baseline_times)
    summary = {
        "serve_history": figure(history, baseline),
        "serve_metrics": figure(metrics, baseline),
        "metrics_after_event": figure(after_event, baseline),
        "metrics_remade": figure(first, statistics.median(first_baseline)),
        "metrics_remade_in_process": figure(remade, baseline),
    }
    return summary, baseline_times


if __name__ == "__main__":
    main()
