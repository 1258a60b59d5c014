#!/usr/bin/env python
"""Figure 15: the prometheus measurement process end to end, as the controller starts it (`python -m rollouts
measure --resolved`, the template in $ROLLOUT_ANALYSIS), vs a bare `python -c` that imports urllib3 and makes
the same query; medians of several runs, interleaved, in one run. Goal (DESIGN 7.9): at most 1.3x.

    python bench/performance/measure.py [--reps N]

It asks Debian's Prometheus (started here on a free loopback port, with a data directory of its own) when
`prometheus` is installed, else a stand-in that answers the query API's JSON (noted beside the figure).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from bench.performance.figures import Figure, median  # noqa: E402
from bench.shared.harness import PYTHON, Sizes, Workspace  # noqa: E402

QUERY = "0.004"
BARE = (
    "import json, urllib3\n"
    "reply = urllib3.PoolManager().request('GET', {url!r}, timeout=urllib3.Timeout(total=30), retries=False)\n"
    "print(json.loads(reply.data)['data']['result'][1])\n"
)
SCALAR = json.dumps({"status": "success", "data": {"resultType": "scalar", "result": [1e9, QUERY]}}).encode()


def bench_measure(ws: Workspace, sizes: Sizes) -> list[Figure]:
    """bench/run.py's figure: the medians of sizes.cli_reps runs of each."""
    with server() as (address, note):
        process_ms, bare_ms = timed(address, sizes.cli_reps)
    label = "15 prometheus measurement process vs python -c urllib3 + the same query"
    return [Figure("measure_process_ms", label, "ms", process_ms, bare_ms, "<=1.3x", note=note)]


def timed(address: str, reps: int) -> tuple[float, float]:
    """(the measurement process, the bare query), median wall milliseconds, runs interleaved."""
    template = {"provider": "prometheus", "address": address, "query": QUERY, "success": "result < 0.01"}
    env = {"PATH": "/usr/bin:/bin", "ROLLOUT_ANALYSIS": json.dumps({**template, "name": "bench@1"})}
    process = [PYTHON, "-m", "rollouts", "measure", "--resolved"]
    url = f"{address}/api/v1/query?query={QUERY}"
    bare = [PYTHON, "-c", BARE.format(url=url)]
    wall(process, env, expect=0)  # warm the page cache and the bytecode, untimed
    wall(bare, env, expect=0)
    times: dict[str, list[float]] = {"process": [], "bare": []}
    for _ in range(reps):
        times["process"].append(wall(process, env, expect=0))
        times["bare"].append(wall(bare, env, expect=0))
    return median(times["process"]) * 1000, median(times["bare"]) * 1000


def wall(argv: list[str], env: dict[str, str], expect: int) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True)
    elapsed = time.perf_counter() - started
    if done.returncode != expect:
        raise RuntimeError(f"{argv[:4]} exited {done.returncode}: {done.stdout.decode()[-300:]}{done.stderr.decode()}")
    return elapsed


@contextmanager
def server() -> Iterator[tuple[str, str]]:
    """(the address of a server answering instant queries, a note saying which)."""
    binary = shutil.which("prometheus")
    if binary is None:
        with stand_in() as address:
            yield address, "a stand-in for Prometheus (not installed) answered"
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="rollouts-bench-prom-") as work:
        (Path(work) / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\n")
        argv = [
            binary,
            f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.path={work}/data",
            f"--config.file={work}/prometheus.yml",
        ]
        prometheus = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            address = f"http://127.0.0.1:{port}"
            ready(address)
            yield address, "Debian's Prometheus answered"
        finally:
            prometheus.terminate()
            prometheus.wait(timeout=30)


def ready(address: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{address}/-/ready", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("prometheus was not ready after 60 s")


@contextmanager
def stand_in() -> Iterator[str]:
    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(SCALAR)))
            self.end_headers()
            self.wfile.write(SCALAR)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=15, help="runs of each behind the medians")
    args = parser.parse_args()
    with server() as (address, note):
        process_ms, bare_ms = timed(address, args.reps)
    print(f"measurement process {process_ms:.1f} ms, bare query {bare_ms:.1f} ms: {process_ms / bare_ms:.2f}x ({note})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
