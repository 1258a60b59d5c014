"""Figures 5 and 11 of bench/run.py: the time of one controller pass, idle with a long history against a short
one, and with 10,000 configs against 100 (idle, and busy with deployments another controller holds)."""

from __future__ import annotations

import time
from typing import Any

from bench.performance.figures import Figure, median
from bench.shared.harness import ACTOR, Sizes, Workspace, meta
from rollouts.adapters.home import Home
from rollouts.adapters.service.bootstrap import open_app
from rollouts.domain.spec import Spec


def projection_store(app: Any, home: Home) -> Any:
    from rollouts.adapters.store.reader import RecorderSource
    from rollouts.projections.store import ProjectionStore

    return ProjectionStore(home.projections, RecorderSource(app.recorder))


# -- figure 5: idle reconcile pass ---------------------------------------------------------------


def idle_controller(home: Home, expect_open: int = 0) -> tuple[Any, Any, Any]:
    from rollouts.adapters.controller.loop import Controller, claimant_id
    from rollouts.adapters.runtime.local import LocalRuntime

    app = open_app(home, None)
    runtime = LocalRuntime(home.path)
    ctl = Controller(app, projection_store(app, home), runtime, claimant_id(home), ACTOR, str(home.path))
    if expect_open:
        from rollouts.adapters.service.leases import Leases

        Leases(app).renew(OTHER)
    open_count, acted = ctl.reconcile()  # catches the desired view up from zero: not timed
    if open_count != expect_open or acted:
        raise RuntimeError(f"{home.path}: the history should be idle, saw {open_count} open, {acted} actions")
    return ctl, app, runtime


def bench_idle(small: Home, big: Home, sizes: Sizes, big_events: int) -> list[Figure]:
    loaded = [idle_controller(small), idle_controller(big)]
    per_pass: list[list[float]] = [[], []]
    try:
        for _ in range(sizes.reps):
            for i, (ctl, _, _) in enumerate(loaded):
                for _ in range(sizes.idle_passes):
                    t = time.perf_counter()
                    ctl.reconcile()
                    per_pass[i].append(time.perf_counter() - t)
    finally:
        for _, app, runtime in loaded:
            runtime.close()
            app.close()
    return [
        Figure(
            "idle_reconcile_ms",
            f"5 idle reconcile pass, {big_events:,} vs 1k events",
            "ms",
            median(per_pass[1]) * 1000,
            median(per_pass[0]) * 1000,
            "<=1.2x",
        )
    ]


# -- figure 11: a pass with 10,000 configs vs 100 ------------------------------------------------

OTHER = "bench-other-controller"  # a live controller of another home, holding the busy passes' claims


def scale_home(ws: Workspace, configs: int, open_: int) -> Home:
    """`configs` configs (saved many at a time), the first `open_` with a deployment claimed by OTHER."""
    from rollouts.domain import rollout
    from rollouts.domain.config import DeploymentConfig

    home = ws.home(f"scale-{configs}-{open_}")
    app = open_app(home, None)
    try:
        spec = Spec(command=["true"]).to_data()
        pending: list[Any] = []
        for i in range(configs):
            config = DeploymentConfig(name=f"s{i:05d}", spec=spec, meta=meta())
            pending.append(config)
            if i < open_:
                (deployment,) = [
                    a
                    for a in rollout.trigger(config, [], cause="manual", message=None, supersede=False, meta=meta())
                    if a is not config
                ]
                rollout.claim(config, deployment, OTHER, meta())
                pending.append(deployment)
            if len(pending) >= 1000:
                app.save(*pending)
                pending = []
        if pending:
            app.save(*pending)
    finally:
        app.close()
    return home


def pass_times(home: Home, passes: int, reps: int, expect_open: int) -> list[float]:
    from rollouts.adapters.service.leases import Leases

    ctl, app, runtime = idle_controller(home, expect_open)
    times: list[float] = []
    try:
        for _ in range(reps):
            Leases(app).renew(OTHER)  # OTHER stays alive: its claims are left to it
            for _ in range(passes):
                t = time.perf_counter()
                open_count, acted = ctl.reconcile()
                times.append(time.perf_counter() - t)
                if (open_count, acted) != (expect_open, 0):
                    raise RuntimeError(
                        f"{home.path}: expected {expect_open} open and no action, saw {open_count}, {acted}"
                    )
    finally:
        runtime.close()
        app.close()
    return times


def bench_scale(ws: Workspace, sizes: Sizes) -> list[Figure]:
    idle_small, idle_big = scale_home(ws, 100, 0), scale_home(ws, 10_000, 0)
    busy_small, busy_big = scale_home(ws, 100, 100), scale_home(ws, 10_000, 1_000)
    idle = [pass_times(h, sizes.idle_passes, sizes.reps, 0) for h in (idle_small, idle_big)]
    busy = [
        pass_times(h, max(3, sizes.idle_passes // 10), sizes.reps, n) for h, n in ((busy_small, 100), (busy_big, 1000))
    ]
    return [
        Figure(
            "idle_pass_10k_configs_ms",
            "11 idle pass, 10k configs vs 100",
            "ms",
            median(idle[1]) * 1000,
            median(idle[0]) * 1000,
            "<=1.5x",
        ),
        Figure(
            "busy_pass_10k_configs_ms_per_deployment",
            "11 busy pass per open deployment, 10k configs (1k open) vs 100 (100 open)",
            "ms",
            median(busy[1]) * 1000 / 1000,
            median(busy[0]) * 1000 / 100,
            "<=1.5x",
            "open deployments claimed by another live controller: read, planned, left to it",
        ),
    ]
