"""The chaos run's operations (bench/chaos/run.py): the CLI commands it draws, runs and notes."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from bench.chaos.model import (
    FAIL_VAR,
    FORCED,
    INLINE,
    LIFTS,
    OP_TIMEOUT,
    POLICIES,
    Interrupted,
    Op,
    Verdict,
    step_script,
)


class Operations:
    """Drawing, running and noting the commands of a chaos run (a part of chaos.Chaos)."""

    def cli(
        self, args: list[str], actor: str | None = None, timeout: float = OP_TIMEOUT
    ) -> tuple[int | None, str, str]:
        """Run `rollouts ARGS` to its end; (None, ...) if it had to be killed."""
        if self.stopping:
            raise Interrupted
        assert self.commands is not None
        rc, out, err, _ = self.commands.run([*(["--as", actor] if actor else []), *args], timeout)
        return rc, out, err

    def json_of(self, args: list[str]) -> Any:
        rc, out, err = self.cli([*args, "-o", "json"], timeout=900)
        if rc != 0:
            raise RuntimeError(f"rollouts {' '.join(args)} exited {rc}: {err.strip()[-500:]}")
        return json.loads(out)

    def record(self, op: Op) -> None:
        """Append the op to ops.jsonl (the evidence kept when a run fails)."""
        with self.lock, contextlib.suppress(ValueError):  # closed by cleanup(): nothing to keep
            self.journal.write(json.dumps(asdict(op)) + "\n")

    def sleep(self) -> float:
        return self.rng.choice(self.profile.step_sleeps)

    def hook(self, which: str) -> str:
        return shlex.join(["sh", "-c", step_script(self.gt, self.rng.choice(self.profile.hook_sleeps), which)])

    def new_op(self, kind: str, config: str | None, args: list[str], **extra: Any) -> Op:
        self.op_ids += 1
        op = Op(self.op_ids, kind, config, args, actor=f"chaos-op-{self.op_ids}", **extra)
        self.ops.append(op)
        return op

    def draw(self, kind: str | None = None) -> Op:
        """The next command, every choice from the seeded generator."""
        rng = self.rng
        weights = self.profile.weights
        kind = kind or rng.choices(list(weights), list(weights.values()))[0]
        conf = rng.choice(self.configs)
        name = conf.name
        pick = rng.random()
        check_read = rng.random() < 0.25
        if self.args.scale and kind in LIFTS:  # of 24 configs, one at random is seldom the one paused or frozen
            with self.lock:
                held = sorted(self.held[LIFTS[kind]])
            name = held[int(pick * len(held))] if held else name
        if kind in ("promote", "promote_full", "abort"):
            name = self.step_target(kind, name)
        step_args = self.step_op_args(kind, name)
        if step_args is not None:
            args = step_args
        elif kind in ("latest", "latest_supersede", "queue"):
            args = ["rollout", "latest", name, "--reason", f"chaos {self.op_ids + 1}"]
            args += {"latest_supersede": ["--supersede"], "queue": ["--queue"]}.get(kind, [])
        elif kind == "undo":
            args = ["rollout", "undo", name]
            if conf.latest_known and rng.random() < 0.5:
                args += ["--to-revision", str(rng.randint(1, conf.latest_known))]
        elif kind == "config_set":
            args = ["config", "set", name, *self.spec_change(name)]
        elif kind in ("cancel", "retry", "pause", "resume"):
            args = ["rollout", kind, name]
        elif kind == "read":
            args = rng.choice(
                (
                    ["rollout", "status", name],
                    ["rollout", "history", name, "-o", "json"],
                    ["events", name, "--type", "DeployerCreated", "-o", "json"],
                    ["projections", "status"],
                    ["deployers", "list"],
                )
            )
        elif kind in ("rebuild", "rebuild_shadow"):
            args = ["projections", "rebuild", *(["--shadow"] if kind == "rebuild_shadow" else [])]
        elif kind in ("freeze", "unfreeze"):  # of one config, or (rarely) of all; a freeze's --until is set at run time
            args = [kind, *(["--all"] if rng.random() < 0.15 else [name])]
            if kind == "freeze":
                args += ["--reason", f"chaos {self.op_ids + 1}"]
        else:  # kill_controller, kill_shim, delete, corrupt_view: what to hit is chosen at run time with `pick`
            args = []
        return self.new_op(kind, name, args, check_read=check_read, pick=pick)

    def spec_change(self, name: str) -> list[str]:
        rng = self.rng
        if (stage_change := self.stage_spec_change(name)) is not None:
            return stage_change
        if name in self.stepped and rng.random() < 0.3:
            return self.step_spec_change()
        v = rng.random()
        if v < 0.3:
            return ["--env", f"NOISE={rng.randrange(1_000_000)}"]
        if v < 0.45:
            return ["--env", f"{rng.choice(list(FAIL_VAR.values()))}={1 if rng.random() < 0.25 else 0}"]
        if v < 0.65:
            return ["--", "sh", "-c", step_script(self.gt, self.sleep(), "deploy")]
        if v < 0.8:
            which = rng.choice(("pre", "post"))
            if rng.random() < 0.3:
                return [f"--{which}-hook", ""]
            return [f"--{which}-hook", self.hook(which), f"--{which}-hook-policy", rng.choice(POLICIES)]
        if v < 0.9:
            return ["--timeout", str(rng.choice((3, 5, 120)))]
        return ["--env", "NOISE-"]

    def run_op(self, op: Op) -> Op:
        op.t0 = time.time()
        try:
            if op.kind == "delete":
                rows = self.runtime_rows("WHERE state = 'running'")
                if not rows:
                    op.rc = None
                    return op
                target = rows[int(op.pick * len(rows))]["name"]
                op.args = ["deployers", "delete", target]
            if op.kind == "freeze":
                lengths = self.profile.freeze_seconds
                seconds = lengths[int(op.pick * len(lengths))]
                if seconds is not None:
                    op.args = [*op.args, "--until", datetime.fromtimestamp(time.time() + seconds, UTC).isoformat()]
            op.rc, op.out, op.err = self.cli(op.args, actor=op.actor)
            self.note(op)
            if op.revision is not None and op.check_read:
                argv = ["rollout", "history", op.config, "--revision", str(op.revision), "-o", "json"]
                rc, out, err = self.cli(argv)  # type: ignore[list-item]
                op.read_back = rc == 0 and any(r.get("version") == op.revision for r in json.loads(out or "[]"))
                if not op.read_back:
                    op.err += f"\nread back: exit {rc}: {err.strip()[-300:]}"
        except Interrupted:
            pass
        finally:
            op.t1 = time.time()
            self.record(op)
        return op

    def note(self, op: Op) -> None:
        """Read what a command printed: the version it triggered, whether it changed the spec."""
        if op.rc != 0:
            return
        out = op.out.strip()
        if op.kind in ("latest", "latest_supersede", "queue") and out.isdigit():
            op.revision = int(out)
            self.counts["queued"] += op.kind == "queue"
        elif op.kind == "undo":
            m = re.search(r"as version (\d+)", out)
            op.revision = int(m[1]) if m else None
        elif op.kind in ("config_set", "config_create"):
            op.updated = " updated" in out or op.kind == "config_create"
            m = re.search(r"version (\d+) triggered", out)
            op.revision = int(m[1]) if m else None
        elif op.kind == "delete":
            self.counts["deletes"] += 1
        elif op.kind in ("rebuild", "rebuild_shadow"):
            self.counts[op.kind] += 1
        elif op.kind == "freeze":
            self.counts["freeze_kept"] += 1  # (set back to 0 by a log restore)
        if op.kind in ("pause", "freeze") and "--all" not in op.args:
            with self.lock:
                self.held[op.kind].add(op.config)  # type: ignore[arg-type]
        elif op.kind in LIFTS and "--all" not in op.args:
            with self.lock:
                self.held[LIFTS[op.kind]].discard(op.config)  # type: ignore[arg-type]
        if op.revision is not None:
            with self.lock:
                self.versions += 1
                for conf in self.configs:
                    if conf.name == op.config:
                        conf.latest_known = max(conf.latest_known, op.revision)

    def issue(self, verdict: Verdict) -> None:
        self.issue_start = time.monotonic()
        deadline = self.issue_start + self.args.minutes * 60
        backups, restores = self.profile.restore_points(self.args.rollouts)
        forced = dict(FORCED)
        moves = self.move_points()
        inflight: set[Future[Op]] = set()
        last_report = time.monotonic()
        with ThreadPoolExecutor(self.workers) as pool:
            try:
                while self.versions < self.args.rollouts and time.monotonic() < deadline:
                    self.maintain_controllers(verdict)
                    progress = self.progress()
                    if backups and progress >= backups[0]:
                        backups.pop(0)
                        self.quiesce(inflight)
                        self.take_backup()
                        continue
                    if moves and progress >= moves[0]:
                        moves.pop(0)
                        wait(inflight)
                        self.move_log(verdict)
                        continue
                    if restores and progress >= restores[0] and self.backup.exists():
                        restores.pop(0)
                        self.quiesce(inflight)
                        self.restore_backup()
                        continue
                    done = {f for f in inflight if f.done()}
                    for f in done:
                        f.result()
                    inflight -= done
                    if len(inflight) >= self.workers:
                        wait(inflight, timeout=0.05, return_when=FIRST_COMPLETED)
                        continue
                    due = [k for k, at in forced.items() if progress >= at and not self.did(k) and self.can(k)]
                    op = self.draw(due[0] if due else None)
                    if due and op.kind == "freeze":
                        op.pick = 0.999  # the forced freeze lasts until lifted: no --until a slow command could pass
                    if due and op.kind not in INLINE:
                        forced.pop(op.kind)  # issued once; its count shows only when it is done
                    if op.kind in INLINE:
                        self.chaos_inline(op)
                    else:
                        inflight.add(pool.submit(self.run_op, op))
                    if time.monotonic() - last_report > 15:
                        last_report = time.monotonic()
                        self.report_progress()
                wait(inflight)
                for f in inflight:
                    f.result()
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                self.cleanup()  # kill running commands now rather than wait for them
                raise

    def can(self, kind: str) -> bool:
        """Whether a forced chaos action has something to act on now (a running deployer)."""
        return kind not in ("kill_shim", "delete") or bool(self.runtime_rows("WHERE state = 'running'"))

    def did(self, kind: str) -> bool:
        return {
            "kill_controller": self.counts["controller_kills"],
            "kill_shim": self.counts["shim_kills"],
            "delete": self.counts["deletes"],
            "rebuild": self.counts["rebuild"],
            "rebuild_shadow": self.counts["rebuild_shadow"],
            "corrupt_view": self.counts["corruptions"],
            "freeze": self.counts["freeze_kept"],
        }[kind] > 0

    def lift_freezes(self) -> None:
        """Before the settle: every freeze in force lifted, timed ones included (a refusal: there was none)."""
        for target in [["--all"], *([c.name] for c in self.configs)]:
            self.cli(["unfreeze", *target], actor="chaos-settle")
