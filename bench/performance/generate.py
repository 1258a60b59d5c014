"""The benchmarks' one log generator: users and a controller acting through the domain.

The log is generated through the domain: the same decisions the application's commands
(rollout.trigger, rollout.cancel, rollout.retry, config changes, pause and resume) and the
controller's commands (rollout.claim, the Deployment reports, rollout.settle) take, on
aggregates kept in memory and saved several at a time with RolloutsApp.save, over a few
hundred configs. `cached_log` keeps one in /tmp/rollouts-bench-rebuild-v2-<N>/ and reuses it.

Imported as bench.performance.generate by the figures (bench/run.py, rebuild.py, chain.py, ...) and by tests.
"""

from __future__ import annotations

import fcntl
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rollouts.adapters.home import Home
from rollouts.adapters.service.application import new_meta
from rollouts.adapters.service.bootstrap import open_app
from rollouts.domain import phases, rollout
from rollouts.domain.config import DeploymentConfig
from rollouts.domain.deployment import Deployment
from rollouts.domain.spec import HOOK_POLICIES, Spec

GENERATOR = "v2"  # v2: written with no config snapshots (the application takes none)
CLAIMANT = "bench-controller"


def random_spec(rng: random.Random) -> dict[str, Any]:
    hooks = {
        k: {"command": [k.split("_")[0], "--check"], "policy": rng.choice(HOOK_POLICIES)}
        for k in ("pre_hook", "post_hook")
        if rng.random() < 0.3
    }
    return Spec.model_validate(
        {
            "command": ["./deploy.sh", f"--build={rng.randint(1, 10_000)}"],
            "env": {f"VAR_{i}": str(rng.randint(0, 999)) for i in range(rng.randint(0, 4))},
            "timeout": rng.choice([60, 600, 3600]),
            "history_limit": rng.randint(2, 10),
            "trigger": rng.choice(["manual", "manual", "config-change"]),
            **hooks,
        }
    ).to_data()


class Generator:
    """Users and a controller acting on `configs` configs; aggregates stay in memory (only we write)."""

    def __init__(self, app: Any, rng: random.Random, configs: int) -> None:
        self.app = app
        self.rng = rng
        self.names = [f"svc-{i:03d}" for i in range(configs)]
        self.configs: dict[str, DeploymentConfig] = {}
        self.opened: dict[str, list[Deployment]] = {}
        self.latest: dict[str, Deployment] = {}
        self.touched: dict[Any, Any] = {}

    def user(self) -> dict[str, Any]:
        return new_meta(self.rng.choice(["alice@ops", "bob@ops", "ci@build", "carol@dev"]))

    def controller(self) -> dict[str, Any]:
        return new_meta("controller@host", claimant=CLAIMANT, notification_id=self.rng.randint(1, 1 << 20))

    def touch(self, *aggregates: Any) -> None:
        for a in aggregates:
            self.touched[a.id] = a

    def save(self) -> None:
        self.app.save(*self.touched.values())
        self.touched.clear()

    def act(self, name: str) -> None:
        rng = self.rng
        if name not in self.configs:
            self.configs[name] = DeploymentConfig(name=name, spec=random_spec(rng), meta=self.user())
            self.opened[name] = []
            self.touch(self.configs[name])
            return
        config, open_ = self.configs[name], self.opened[name]
        r = rng.random()
        if config.paused:
            if r < 0.5:
                config.resume(self.user())
                self.touch(config)
            elif open_:
                self.progress(config, open_)
        elif r < 0.03:
            spec = random_spec(rng)
            if config.change_spec(spec, self.user()) and spec["trigger"] == "config-change":
                self.trigger(config, open_, "config change", supersede=True)
            self.touch(config)
        elif r < 0.04:
            config.pause(self.user())
            self.touch(config)
        elif not open_ or r < 0.06:
            last = self.latest.get(name)
            if last is not None and last.phase == phases.FAILED and not open_ and rng.random() < 0.3:
                self.touch(*rollout.retry(config, last, self.user()))
                open_.append(last)
            else:
                self.trigger(config, open_, "manual", supersede=bool(open_))
        elif r < 0.07:
            self.touch(*rollout.cancel(config, open_, self.user()))
        else:
            self.progress(config, open_)
        open_[:] = [d for d in open_ if not d.is_terminal]

    def trigger(self, config: DeploymentConfig, open_: list[Deployment], cause: str, supersede: bool) -> None:
        message = self.rng.choice([None, "release", "hotfix"])
        made = rollout.trigger(config, open_, cause=cause, message=message, supersede=supersede, meta=self.user())
        self.touch(*made)
        self.latest[config.name] = made[-1]
        open_.append(made[-1])

    def progress(self, config: DeploymentConfig, open_: list[Deployment]) -> None:
        """One controller step on the oldest open deployment: claim, create, start, exit, settle."""
        d, meta, rng = open_[0], self.controller(), self.rng
        if d.phase == phases.NEW:
            if len(open_) == 1 and config.slot is None:
                self.touch(*rollout.claim(config, d, CLAIMANT, meta))
            return
        step = d.step
        if step is None:  # never: a deployment open past New runs a step
            return
        r = rng.random()
        if d.cancel_requested:
            d.confirm_cancelled(meta)
        elif r < 0.01:
            d.time_out(d.typed_spec().timeout, meta)
        elif r < 0.02:
            d.report_lost(step.name, "deleted", meta)
        elif not step.created:
            d.report_created(step.name, f"local:{step.name}", meta)
        elif not step.started:
            d.report_started(step.name, meta)
        else:
            d.report_exited(step.name, rng.choice([0] * 9 + [1, 2]), None, meta)
        rollout.settle(config, d, meta)
        self.touch(config, d)


def generate(home: Home, events: int, configs: int, per_save: int, seed: int) -> None:
    app = open_app(home, None)
    gen = Generator(app, random.Random(seed), configs)
    started = time.perf_counter()
    done, report = 0, 50_000
    try:
        while done < events:
            for _ in range(per_save):
                gen.act(gen.rng.choice(gen.names))
            gen.save()
            done = app.recorder.max_notification_id() or 0
            if done >= report:
                report += 50_000
                rate = done / (time.perf_counter() - started)
                print(f"  generated {done:,} events ({rate:,.0f}/s)", file=sys.stderr, flush=True)
    finally:
        app.close()


def cached_log(events: int, configs: int, fresh: bool) -> Home:
    """The home holding a generated log of about `events` events over `configs` configs, reused across runs."""
    # The usual 300 configs keep the folder name earlier runs cached; other counts get their own.
    suffix = "" if configs == 300 else f"-{configs}c"
    home = Home(Path(tempfile.gettempdir()) / f"rollouts-bench-rebuild-{GENERATOR}-{events}{suffix}")
    done = home.path / "complete"
    # One generator at a time per folder: two benchmarks generating the same size at once made one
    # log of both (a 200k cache ended at 135,786 events, marked complete). The later one waits, then reuses.
    with open(f"{home.path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if fresh or not done.exists():
            shutil.rmtree(home.path, ignore_errors=True)
            print(f"generating {events:,} events through the domain into {home.path}", file=sys.stderr)
            t = time.perf_counter()
            generate(home, events, configs, per_save=max(20, configs // 2), seed=events)
            print(f"  took {time.perf_counter() - t:.1f} s", file=sys.stderr)
            done.write_text("ok\n")
    return home
