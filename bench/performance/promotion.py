"""Figure 4b of bench/run.py (DESIGN 7.10): an upstream revision becomes eligible (its Complete event, by the
log's clock) -> the auto stage's deployer running (its first act writes time.time()), with `controller run
--interval 0.1 -q` running; median (goal: at most the interval plus 100 ms) and p99."""

from __future__ import annotations

import random
import time
from datetime import datetime

from bench.performance.figures import Figure, median, nearest_rank
from bench.shared.harness import Sizes, Terminal, Workspace, check_alive, deployment_key, meta, stamp_time
from rollouts.adapters.service.bootstrap import open_app
from rollouts.domain import ids
from rollouts.domain.spec import Spec

INTERVAL = 0.1  # the controller's --interval here; the goal is INTERVAL + 100 ms


def bench_promotion_latency(ws: Workspace, sizes: Sizes) -> list[Figure]:
    home = ws.home("promotion")
    stamps = home.path / "stamps"
    stamps.mkdir()
    app = open_app(home, None)
    stamp = ["sh", "-c", 'date +%s.%N > "$STAMPS/$ROLLOUT_DEPLOYER"']
    app.create_config("up", Spec(command=["true"], env={"IMAGE": "v0"}), meta())
    stage = Spec(command=stamp, env={"STAMPS": str(stamps)}, upstream="up", artifact=["IMAGE"], promote="auto")
    app.create_config("stage", stage, meta())
    controller = ws.controller(home, INTERVAL)
    terminal = Terminal(app)
    latencies = []
    try:
        for i in range(sizes.latency_samples + 1):
            app.set_config("up", lambda s, n=i: s.model_copy(update={"env": {"IMAGE": f"v{n + 1}"}}), meta())
            upstream = app.latest("up", None, False, meta())
            terminal.wait({deployment_key("up", upstream)}, 30, controller)
            config = app.config("up")
            eligible = app.deployment(config, upstream).modified_on  # its Complete event's time: eligible then
            revision = _promoted(app, upstream, controller)
            ran = stamp_time(stamps / ids.deployer_name("stage", revision, 1), f"stage v{revision}", controller)
            if i:  # the first one warms the controller up
                latencies.append((ran - _epoch(eligible)) * 1000)
            terminal.wait({deployment_key("stage", revision)}, 30, controller)
            time.sleep(random.uniform(0, INTERVAL))  # do not always land at the same point of a pass
    finally:
        ws.stop(controller)
        app.close()
    return [
        Figure(
            "promotion_latency_median_ms",
            f"4b upstream eligible -> auto stage's deployer running, median (n={len(latencies)})",
            "ms",
            median(latencies),
            INTERVAL * 1000,
            f"<={INTERVAL * 1000 + 100:.0f}",
            f"baseline: the controller's --interval ({INTERVAL} s); the goal is the interval plus 100 ms",
        ),
        Figure(
            "promotion_latency_p99_ms",
            "4b upstream eligible -> auto stage's deployer running, p99",
            "ms",
            nearest_rank(latencies, 0.99),
            None,
            "<=500",
        ),
    ]


def _promoted(app: object, upstream: int, controller: object) -> int:
    """The stage's revision the controller triggered for upstream revision `upstream` (waits for it)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        config = app.config("stage")  # type: ignore[attr-defined]
        if (config.promoted or {}).get("up", 0) >= upstream:
            return int(config.latest_revision)
        check_alive(controller)  # type: ignore[arg-type]
        time.sleep(0.002)
    raise RuntimeError(f"the stage was not promoted from up v{upstream} within 30 s")


def _epoch(moment: datetime) -> float:
    return moment.timestamp()
