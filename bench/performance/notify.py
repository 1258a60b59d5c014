#!/usr/bin/env python
"""Notification delivery, beside a baseline measured in the same run.

    python bench/performance/notify.py [--notifications 2000] [--delays 60] [--runs 3]

1. rate   notifications/s that the controller's notifier (adapters.notify, the code `controller run`
          starts) delivers to a local sink that answers at once: each POST followed by its
          NotificationDelivered append, as delivery requires; against the same HTTP client (urllib3,
          adapters.notify.http.Poster) POSTing the same documents in a loop; goal >= 0.5x
2. delay  from a terminal event's commit (its timestamp, taken just before the commit: the figure
          errs long) to the sink receiving it, with the notifier idle and polling; goal median <= 100 ms

The sink is bench/shared/sink_server.py in this process (an http.server on 127.0.0.1). The changes are
made in-process before the notifier starts: `rollout latest` then `cancel`, a `triggered` and a
`failed` change each. The last line is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from rollouts.adapters.home import Home
from rollouts.adapters.notify.changes import ChangeReader
from rollouts.adapters.notify.http import Poster
from rollouts.adapters.notify.notifier import Notifier
from rollouts.adapters.service import sinks
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import open_app
from rollouts.domain.spec import Spec

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.shared.sink_server import SinkServer  # noqa: E402


def make_changes(app: Any, count: int) -> None:
    meta = new_meta("bench")
    for i in range(count // 2):
        app.latest("web", None, False, meta)
        app.cancel("web", meta)
        if i % 500 == 0:
            print(f"  {2 * i}/{count} changes", file=sys.stderr, flush=True)


def wait_for(sink: SinkServer, count: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while sink.ok_count < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {sink.ok_count} of {count} notifications arrived")
        time.sleep(0.001 if count == sink.ok_count + 1 else 0.05)


def baseline(documents: list[tuple[dict[str, Any], str]]) -> float:
    with SinkServer() as sink:
        poster = Poster()
        started = time.perf_counter()
        for document, key in documents:
            if poster.post(sink.url, document, key) is not None:
                raise SystemExit("the baseline's sink failed")
        elapsed = time.perf_counter() - started
        poster.close()
    return len(documents) / elapsed


def delivery(count: int, folder: Path) -> tuple[float, list[tuple[dict[str, Any], str]]]:
    home = Home(folder / "rate")
    app = open_app(home, None)
    with SinkServer() as sink:
        sinks.add(app, "bench", sink.url, ("triggered", "failed"), None, new_meta("bench"))
        app.create_config("web", Spec.model_validate({"command": ["true"]}), new_meta("bench"))
        make_changes(app, count)
        head = app.recorder.max_notification_id()
        log_id = app.recorder.log_id() or ""
        documents = [(c.document(), c.key(log_id, "bench")) for c in ChangeReader(app.recorder).changes(0, head)]
        notifier = Notifier(lambda: open_app(home, None), lambda: new_meta("bench"), lambda _: None, "bench")
        started = time.perf_counter()
        notifier.start()
        wait_for(sink, count)
        elapsed = time.perf_counter() - started
        notifier.stop()
        got = [r.body for r in sink.delivered()]
        if got != [d for d, _ in documents] or len(sink.received) != count:
            raise SystemExit("the notifier did not deliver each change once, in order")
    app.close()
    return count / elapsed, documents


def delays(count: int, folder: Path) -> list[float]:
    home = Home(folder / "delay")
    app = open_app(home, None)
    meta = new_meta("bench")
    found = []
    with SinkServer() as sink:
        sinks.add(app, "bench", sink.url, ("failed",), None, meta)
        app.create_config("web", Spec.model_validate({"command": ["true"]}), meta)
        notifier = Notifier(lambda: open_app(home, None), lambda: new_meta("bench"), lambda _: None, "bench")
        notifier.start()
        time.sleep(1.0)  # the notifier finds the sink
        for i in range(count):
            app.latest("web", None, False, meta)
            app.cancel("web", meta)
            wait_for(sink, i + 1, timeout=30)
            got = sink.delivered()[-1]
            committed = datetime.fromisoformat(got.body["timestamp"]).timestamp()
            found.append((got.at - committed) * 1000)
            time.sleep(0.03 + 0.02 * (i % 3))  # arrive at different moments of the notifier's poll
        notifier.stop()
    app.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notifications", type=int, default=2000)
    parser.add_argument("--delays", type=int, default=60)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rates, bases = [], []
    with tempfile.TemporaryDirectory(prefix="bench-notify-") as tmp:
        for run in range(args.runs):  # interleaved: both see the same moments of a shared machine
            rate, documents = delivery(args.notifications, Path(tmp) / f"run{run}")
            base = baseline(documents)
            rates.append(rate)
            bases.append(base)
            print(f"run {run + 1}: notifier {rate:,.0f}/s, baseline {base:,.0f}/s, {rate / base:.2f}x")
        lags = delays(args.delays, Path(tmp))
    rate, base = statistics.median(rates), statistics.median(bases)
    median, p99 = statistics.median(lags), sorted(lags)[min(len(lags) - 1, int(len(lags) * 0.99))]
    print(f"delivery: {rate:,.0f} notifications/s against {base:,.0f}/s posting alone: {rate / base:.2f}x (goal 0.5x)")
    print(f"delay from commit to sink: median {median:.1f} ms, p99 {p99:.1f} ms (goal median <= 100 ms)")
    summary = {
        "notifications": args.notifications,
        "rate": {"value": rate, "baseline": base, "ratio": rate / base, "goal": 0.5, "ok": rate / base >= 0.5},
        "delay_ms": {"median": median, "p99": p99, "goal": 100, "ok": median <= 100},
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
