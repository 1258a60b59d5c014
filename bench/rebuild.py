"""Projection rebuild throughput against eventsourcing's own read+decode ceiling, measured in one run.

    python bench/rebuild.py                 # 1,000,000 events (generated once, cached under /tmp)
    python bench/rebuild.py --quick         # 20,000 events
    python bench/rebuild.py --events 200000 --runs 3 --profile

The log is generated through the domain: the same decisions the application's commands
(rollout.trigger, rollout.cancel, rollout.retry, config changes, pause and resume) and the
controller's commands (rollout.claim, the Deployment reports, rollout.settle) take, on
aggregates kept in memory and saved several at a time with RolloutsApp.save, over a few
hundred configs. It is cached in /tmp/rollouts-bench-rebuild-v1-<N>/ and reused.

Measured, median of --runs runs each, interleaved:
  (a) ceiling: recorder.select_notifications(start, 1000, inclusive_of_start=False) and
      mapper.to_domain_event(n) for every notification;
  (b) ours: ProjectionStore.rebuild() of all three projections from zero, in place, into
      an empty projections folder.
Both are reported in events of the log per second; the goal is (b)/(a) >= 0.6.
The last line of output is one JSON document.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from adapters.application import new_meta  # noqa: E402
from adapters.eventstore import open_app  # noqa: E402
from adapters.home import Home  # noqa: E402
from adapters.log_source import RecorderSource  # noqa: E402
from domain import phases, rollout  # noqa: E402
from domain.config import DeploymentConfig  # noqa: E402
from domain.deployment import Deployment  # noqa: E402
from domain.spec import HOOK_POLICIES, Spec  # noqa: E402
from projections.store import ALL, ProjectionStore  # noqa: E402

GENERATOR = "v1"
CLAIMANT = "bench-controller"
GOAL = 0.6


# -- generating the log through the domain ------------------------------------------------


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
    """The home holding a generated log of about `events` events, reused across runs."""
    home = Home(Path(tempfile.gettempdir()) / f"rollouts-bench-rebuild-{GENERATOR}-{events}")
    done = home.path / "complete"
    if fresh or not done.exists():
        shutil.rmtree(home.path, ignore_errors=True)
        print(f"generating {events:,} events through the domain into {home.path}", file=sys.stderr)
        t = time.perf_counter()
        generate(home, events, configs, per_save=max(20, configs // 2), seed=events)
        print(f"  took {time.perf_counter() - t:.1f} s", file=sys.stderr)
        done.write_text("ok\n")
    return home


# -- measuring --------------------------------------------------------------------------


def ceiling(app: Any) -> tuple[int, float, float]:
    """eventsourcing's own read+decode of the whole log: (events, wall seconds, CPU seconds)."""
    recorder, mapper = app.recorder, app.mapper
    start, count = 0, 0
    t, cpu = time.perf_counter(), time.process_time()
    while True:
        batch = recorder.select_notifications(start, 1000, inclusive_of_start=False)
        if not batch:
            break
        for n in batch:
            mapper.to_domain_event(n)
        count += len(batch)
        start = batch[-1].id
    return count, time.perf_counter() - t, time.process_time() - cpu


def rebuild(app: Any, scratch: Path, profile: cProfile.Profile | None = None) -> tuple[float, float]:
    """ProjectionStore.rebuild() of all projections from zero into an empty folder.

    Returns wall seconds and CPU seconds."""
    folder = scratch / "projections"
    shutil.rmtree(folder, ignore_errors=True)
    store = ProjectionStore(folder, RecorderSource(app.recorder))
    store.catalog  # noqa: B018 - created before the clock starts
    t, cpu = time.perf_counter(), time.process_time()
    if profile:
        profile.enable()
    store.rebuild(ALL)  # one read and decode of the log, folded into every projection
    if profile:
        profile.disable()
    total, cpu = time.perf_counter() - t, time.process_time() - cpu
    head = RecorderSource(app.recorder).head()
    for p in ALL:
        db = store.db(p.name)
        position = db.execute("SELECT position FROM tracking WHERE name = ?", (p.name,)).fetchone()[0]
        assert position == head, f"{p.name} rebuilt to {position}, head {head}"
    return total, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="log size (default 1,000,000)")
    parser.add_argument("--quick", action="store_true", help="20,000 events")
    parser.add_argument("--configs", type=int, default=300, help="configs in the generated history")
    parser.add_argument("--runs", type=int, default=3, help="runs of each measurement (median)")
    parser.add_argument("--regenerate", action="store_true", help="ignore the cached log")
    parser.add_argument("--profile", action="store_true", help="cProfile one more rebuild, top functions on stderr")
    args = parser.parse_args(argv)
    events = 20_000 if args.quick else args.events

    home = cached_log(events, args.configs, args.regenerate)
    app = open_app(home, None)
    scratch = Path(tempfile.mkdtemp(prefix="rollouts-bench-rebuild-"))
    try:
        head = RecorderSource(app.recorder).head()
        ceiling(app)  # warm the page cache and the topic/class caches for both sides
        a_rates: list[float] = []
        b_rates: list[float] = []
        a_cpu: list[float] = []
        b_cpu: list[float] = []
        for run in range(args.runs):
            count, seconds, cpu = ceiling(app)
            assert count == head
            a_rates.append(count / seconds)
            a_cpu.append(count / cpu)
            seconds, cpu = rebuild(app, scratch)
            b_rates.append(head / seconds)
            b_cpu.append(head / cpu)
            print(
                f"run {run + 1}: ceiling {a_rates[-1]:,.0f} ev/s ({a_cpu[-1]:,.0f} per CPU s), "
                f"rebuild {b_rates[-1]:,.0f} ev/s ({b_cpu[-1]:,.0f} per CPU s)",
                file=sys.stderr,
            )
        a, b = statistics.median(a_rates), statistics.median(b_rates)
        ac, bc = statistics.median(a_cpu), statistics.median(b_cpu)
        result = {
            "bench": "rebuild",
            "events": head,
            "configs": args.configs,
            "runs": args.runs,
            "ceiling_events_per_s": round(a),
            "rebuild_events_per_s": round(b),
            "ratio": round(b / a, 3),
            "goal": GOAL,
            "ok": b / a >= GOAL,
            "ceiling_events_per_cpu_s": round(ac),
            "rebuild_events_per_cpu_s": round(bc),
            "ratio_cpu": round(bc / ac, 3),
            "log": str(home.events_db),
        }
        print(f"log: {head:,} events ({home.events_db})")
        print(f"(a) eventsourcing read+decode ceiling: {a:,.0f} events/s, {ac:,.0f} per CPU second")
        print(f"(b) ProjectionStore.rebuild(), all three: {b:,.0f} events/s, {bc:,.0f} per CPU second")
        verdict = "OK" if b / a >= GOAL else "BELOW GOAL"
        print(f"ratio (b)/(a): {b / a:.3f} wall, {bc / ac:.3f} CPU (goal >= {GOAL}): {verdict}")
        print(f"median of {args.runs} runs each, interleaved")
        if args.profile:
            profile = cProfile.Profile()
            rebuild(app, scratch, profile)
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(30)
            print(out.getvalue(), file=sys.stderr)
        print(json.dumps(result))
        return 0
    finally:
        app.close()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
