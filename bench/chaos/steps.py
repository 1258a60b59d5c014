"""The chaos run's steps (bench/chaos/run.py --steps): configs with weighted steps, measurements of random
outcome, manual pauses and the automatic rollback; `rollout promote [--full]` and `rollout abort` among
the ops; and what the run checks of them from the ground truth and the log (DESIGN 7.6, I9, I10).

A measurement is `sh -c` that writes `start NAME T` and `end NAME T RC` to the ground truth, like a
deployer. Its outcome is drawn from the run's seed and its own name (cksum of "SEED NAME MOOD"): below
VERIFY_FAIL_PCT (config env, which `config set` flips among 0, 25 and 50) it exits 1 (failed), in the
next VERIFY_INCONCLUSIVE_PCT it exits 3 (inconclusive: the deployment pauses for a human), else 0.

Checks, from the ground truth (GT) first and the log second:

- i9_violations: a deployment Complete in the log whose completing attempt, in GT, lacks a step
  deployer that finished with exit 0 (the steps a `promote --full` skipped aside), ran its steps out
  of order, or had a measurement that exited 1 with no `promote` of the deployment;
- measurement_mismatches: a measurement that finished in GT with an exit code (or outcome: 0 passed,
  1 failed, else inconclusive) other than the log recorded for it (one the log saw lost or deleted aside);
- rollback_missing: a failure that calls for an automatic rollback (latest of its config, not a cancel,
  not itself a rollback; the config has --auto-rollback or it was aborted; a Complete version before
  it) with no rollback, or one to the wrong revision; rollback_twice: two rollbacks of one failure;
  rollback_unwanted: a rollback of a failure that called for none, or of a rollback.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bench.chaos.model import Verdict
from rollouts.domain import phases

FAIL_PCTS = (0, 25, 50)
INCONCLUSIVE_PCT = 5
STEP_WEIGHTS = ("25,50,100", "50,100", "10,100", "100")
VERIFY_NAME = re.compile(r"^(?P<config>[a-z0-9-]+?)-(?P<version>\d+)-verify-(?P<attempt>\d+)-(?P<k>\d+)$")
DEPLOY_STEP = re.compile(r"^(?P<config>[a-z0-9-]+?)-(?P<version>\d+)-deploy-(?P<attempt>\d+)(?:-step-(?P<k>\d+))?$")
CONFIG_EVENTS = ("Registered", "SpecChanged", "RolloutTriggered", "RollbackTriggered")  # (some carry a version)
STEP_VIOLATIONS = ("i9_violations", "measurement_mismatches", "rollback_missing", "rollback_twice", "rollback_unwanted")


def verify_script(gt: Path, seed: int, sleep: float) -> str:
    out = shlex.quote(str(gt))
    return shlex.join(
        [
            "sh",
            "-c",
            f'echo "start $ROLLOUT_DEPLOYER $(date +%s.%N)" >> {out}; sleep {sleep}; '
            f'h=$(echo "{seed} $ROLLOUT_DEPLOYER $VERIFY_MOOD" | cksum | cut -d" " -f1); p=$((h % 100)); '
            # Version 1 never fails its verification, so a later failure has a Complete version to roll
            # back to: a run of any length exercises the automatic rollback, not only failures before it.
            f'f=${{VERIFY_FAIL_PCT:-20}}; [ "$ROLLOUT_VERSION" = 1 ] && f=0; '
            f"i=$((f + ${{VERIFY_INCONCLUSIVE_PCT:-{INCONCLUSIVE_PCT}}})); "
            "if [ $p -lt $f ]; then rc=1; elif [ $p -lt $i ]; then rc=3; else rc=0; fi; "
            f'echo "end $ROLLOUT_DEPLOYER $(date +%s.%N) $rc" >> {out}; exit $rc',
        ]
    )


class Steps:
    """Steps, measurements, promote and abort in a chaos run (a part of chaos.Chaos)."""

    def step_options(self, name: str) -> list[str]:
        """A config's 7.6 options at `config create` (most verify and roll back; some pause for a human)."""
        rng = self.rng
        if not self.args.steps or rng.random() < 0.15:
            return []
        self.stepped.add(name)
        args = ["--steps", rng.choice(STEP_WEIGHTS), "--env", f"VERIFY_FAIL_PCT={rng.choice(FAIL_PCTS)}"]
        if not self.args.templates or rng.random() < 0.3:
            args += ["--verify", verify_script(self.gt, self.args.seed, rng.choice(self.profile.hook_sleeps))]
        if self.args.templates:
            args += self.template_options()
        args += ["--verify-count", str(rng.choice((1, 2))), "--verify-interval", "0"]
        if rng.random() < 0.9:
            args.append("--auto-rollback")
        if rng.random() < 0.2:
            args += ["--step-pause", "manual"]
            self.manual.add(name)
        return args

    def step_op_args(self, kind: str, name: str) -> list[str] | None:
        """promote, promote_full, abort, verify_mood: the argv of a drawn op (None: not a step op)."""
        if kind in ("promote", "promote_full"):
            return ["rollout", "promote", name, *(["--full"] if kind == "promote_full" else [])]
        if kind == "abort":
            return ["rollout", "abort", name, "--reason", f"chaos {self.op_ids + 1}"]
        if kind == "analysis_set":
            return self.template_edit()
        return None

    def step_spec_change(self) -> list[str]:
        rng = self.rng
        if self.args.templates and rng.random() < 0.3:
            return ["--analysis-arg", f"mood={rng.randrange(100)}"]
        if rng.random() < 0.5:
            return ["--env", f"VERIFY_FAIL_PCT={rng.choice(FAIL_PCTS)}"]
        return ["--env", f"VERIFY_MOOD={rng.randrange(1000)}"]

    def step_target(self, kind: str, name: str) -> str:
        """promote mostly where a human pause is likely (manual configs), abort among verifying configs."""
        pool = sorted(self.manual if kind.startswith("promote") and self.manual else self.stepped)
        return self.rng.choice(pool) if pool else name

    def settle_pauses(self) -> bool:
        """In the settle: what waits for a human goes on (a pause does not keep until-idle running);
        whether anything was paused."""
        promoted = False
        for conf in self.configs:
            if conf.name in self.stepped:
                rc, _, _ = self.cli(["rollout", "promote", conf.name, "--full"], actor="chaos-settle")
                promoted = promoted or rc == 0
        return promoted

    # -- checks -------------------------------------------------------------------------------

    def check_steps(self, verdict: Verdict, runs: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
        if not self.args.steps:
            return
        streams: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
        for e in sorted(events, key=lambda e: e["position"]):
            if e.get("version") is not None and e["type"] not in CONFIG_EVENTS:
                streams[(e["config"], e["version"])].append(e)
        by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in runs:
            by_name[r["name"]].append(r)
        recorded = {e["data"].get("name"): e["data"] for e in events if e["type"] == "MeasurementRecorded"}
        self.counts["measurements"] = len(recorded)
        self.counts["measurements_by_outcome"] = dict(Counter(d.get("outcome") for d in recorded.values()))
        self.counts["promotes"] = sum(1 for e in events if e["type"] == "Promoted")
        self.counts["aborts"] = sum(1 for e in events if e["type"] == "Aborted")
        for r in runs:
            m = VERIFY_NAME.match(r["name"])
            seen = recorded.get(r["name"]) or {}
            if m and r["end"] is not None and seen.get("exit_code") is not None:  # (None: it was lost, deleted)
                rc = r.get("rc")
                want = "passed" if rc == 0 else "failed" if rc == 1 else "inconclusive"
                if (seen.get("outcome"), seen.get("exit_code")) != (want, rc):
                    verdict.add("measurement_mismatches", {"name": r["name"], "gt_rc": rc, "log": seen})
        for key, stream in streams.items():
            self.check_completed_steps(verdict, key, stream, by_name)
        self.check_rollbacks(verdict, events, streams)
        self.check_templates(verdict, events)

    def check_completed_steps(
        self,
        verdict: Verdict,
        key: tuple[str, int],
        stream: list[dict[str, Any]],
        by_name: dict[str, list[dict[str, Any]]],
    ) -> None:
        """I9 from GT: the completing attempt's step deployers all ran to exit 0, in order; no failed
        measurement unless a human promoted."""
        config, version = key
        phase, attempt, claimed_at, steps, promoted, full = None, 0, 0.0, 1, False, None
        for e in stream:
            phase = phases.phase_after(phase, e["type"], e["data"])
            if e["type"] == "Created":
                steps = len((e["data"].get("spec") or {}).get("steps") or []) or 1
            if e["type"] == "DeployerClaimed":
                attempt, promoted, full = e["data"].get("attempt", attempt), False, None
                claimed_at = float(_epoch(e["timestamp"]))
            if e["type"] == "Promoted":
                promoted = True
                full = int(e["data"].get("step", 1)) if e["data"].get("full") else full
        if phase != phases.COMPLETE or config not in self.stepped:
            return
        base = f"{config}-{version}-deploy-{attempt}"
        needed = range(1, steps + 1) if full is None else [*range(1, full + 1), steps]
        last_end = -1.0
        for k in sorted(set(needed)):
            name = f"{base}-step-{k}" if steps > 1 or f"{base}-step-{k}" in by_name else base
            done = [r for r in by_name.get(name, []) if r["start"] >= claimed_at and r["end"] is not None]
            ok = [r for r in done if r.get("rc") == 0]
            if not ok:
                verdict.add("i9_violations", {"deployment": key, "step": k, "why": "no run of it exited 0 in GT"})
                return
            if ok[-1]["start"] < last_end:
                verdict.add("i9_violations", {"deployment": key, "step": k, "why": "started before step before ended"})
            last_end = ok[-1]["end"]
        if not promoted:
            prefix = f"{config}-{version}-verify-{attempt}-"
            for name, rs in by_name.items():
                if name.startswith(prefix) and any(r.get("rc") == 1 and r["start"] >= claimed_at for r in rs):
                    verdict.add("i9_violations", {"deployment": key, "why": f"Complete though {name} exited 1"})

    def check_rollbacks(
        self, verdict: Verdict, events: list[dict[str, Any]], streams: dict[tuple[str, int], list[dict[str, Any]]]
    ) -> None:
        """I10: each failure that calls for a rollback has exactly one, to the last Complete version before it."""
        auto: dict[str, bool] = {}
        latest: dict[str, int] = {}
        completes: dict[str, list[int]] = defaultdict(list)
        phase: dict[tuple[str, int], str | None] = {}
        cause: dict[tuple[str, int], str] = {}
        due: dict[tuple[str, int], int | None] = {}  # failed -> version to restore (None: calls for none)
        rollbacks: dict[tuple[str, int], list[int]] = defaultdict(list)  # failed -> rollback versions
        ran: set[tuple[str, int]] = set()  # deployments a deployer step was claimed for: only they are rolled back
        for e in sorted(events, key=lambda e: e["position"]):
            config, version, data = e["config"], e.get("version"), e.get("data") or {}
            if e["type"] in CONFIG_EVENTS:
                if e["type"] in ("Registered", "SpecChanged"):
                    auto[config] = bool((data.get("spec") or {}).get("auto_rollback"))
                elif e["type"] == "RolloutTriggered":
                    latest[config] = int(data.get("revision", latest.get(config, 0)))
                continue
            key = (config, version)
            if e["type"] == "Created":
                cause[key] = data.get("cause") or ""
                m = re.match(r"automatic rollback to (\d+)", cause[key])
                if m:
                    failed = re.search(r"version (\d+) failed", data.get("message") or "")
                    rollbacks[(config, int(failed[1]) if failed else -1)].append(version)
            step = data.get("step") if e["type"] == "DeployerClaimed" else data.get("next")
            if (step or e["type"] == "DeployerClaimed") and (step or {}).get("kind", "deployer") == "deployer":
                ran.add(key)
            before = phase.get(key)
            after = phases.phase_after(before, e["type"], data)
            phase[key] = after
            if after == before:
                continue
            if after == phases.COMPLETE:
                completes[config].append(version)
            elif after == phases.FAILED:
                reason = data.get("reason") or ""
                cancelled = e["type"] in ("Cancelled", "CancelRequested")
                calls = (
                    version == latest.get(config)
                    and not cancelled
                    and not cause.get(key, "").startswith("automatic rollback")
                    and (auto.get(config, False) or reason.startswith("aborted"))
                    and key in ran  # (7.11: nothing ran, nothing to roll back)
                )
                before_it = [v for v in completes[config] if v < version]
                due[key] = before_it[-1] if calls and before_it else None
        self.counts["rollbacks"] = sum(len(v) for v in rollbacks.values())
        for key, to in due.items():
            got = rollbacks.get(key, [])
            if to is not None and not got:
                verdict.add("rollback_missing", {"failed": key, "to": to})
            elif len(got) > 1:
                verdict.add("rollback_twice", {"failed": key, "rollbacks": got})
            elif got and to is None:
                verdict.add("rollback_unwanted", {"failed": key, "rollback": got})
            elif got and not cause[(key[0], got[0])].startswith(f"automatic rollback to {to}"):
                verdict.add("rollback_missing", {"failed": key, "to": to, "cause": cause[(key[0], got[0])]})
        for key, got in rollbacks.items():
            if key not in due:
                verdict.add("rollback_unwanted", {"failed": key, "rollbacks": got, "why": "not failed"})


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()
