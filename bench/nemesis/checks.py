"""The nemesis run's checker (bench/nemesis/run.py), independent of `audit`: it reads the deployers' own
ground truth (GT) and what each command printed, and the log only to know what was acknowledged.

Violations:
- duplicates: a deployer name started more than once in GT;
- tick_overlaps: two claims of one config ticking at once. A tick is a `claim check` that said yes,
  then a line; its time is when its check started (the check's answer is read between that and the
  line). Fencing promises that every tick of a claim comes before every tick of a later claim of the
  config (the later claim exists only once the earlier has ended in the log, after which no check of
  it says yes): a tick of claim A started after a tick of a later claim B is a violation;
- completed_without_exit0: a deployment Complete in the log whose completing claim's deployer (its
  last step) has no GT run under that very claim (ROLLOUT_CLAIM in its start line) that ended 0;
- lost_writes / phantom_writes: bench/chaos/checks.py's (an acknowledged write missing from the
  log; a write refused by exit 1, 3 or 4 whose events are in the log), the approvals' too;
- unknown_reported_failed: a write whose outcome its client cannot know (exit 5, or killed at its
  timeout) that was committed, and whose client did not say the outcome is unknown (its error line
  says "unknown" or "may have"); unknown_committed counts those committed, said or not;
- audit, log_verify, projections_diff: each must be clean at the end (from host 0, faults off);
- unstopped: a deployer still alive after the settle.

Figures: the longest time from a host's last lease renewal (the database's renewed_at, as the
harness saw it change) to its deployer's stop (its process gone, a deployer that wrote no `end`),
apart for deployers of a host that was paused meanwhile (they stop when woken, not by then).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bench.chaos.checks import Checks
from bench.chaos.model import STEP_NAME, Op, Verdict

WATCH_S = 0.05  # how often the harness looks for deployers gone (bench/nemesis/run.py watch_loop)
VIOLATIONS = (
    "duplicates",
    "tick_overlaps",
    "completed_without_exit0",
    "lost_writes",
    "phantom_writes",
    "unknown_reported_failed",
    "audit",
    "log_verify",
    "projections_diff",
    "unstopped",
    "controller_crashes",
    "settle",
)
UNKNOWN_WORDS = ("unknown", "may have")


def parse_gt(path: Path) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """Runs by deployer name (in order), and lines that fit no run."""
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    garbled = []
    for line in path.read_text().splitlines() if path.exists() else []:
        parts = line.split()
        if len(parts) < 3:
            garbled.append(line)
            continue
        kind, name, stamp = parts[0], parts[1], float(parts[2])
        if kind == "start":
            claim = parts[4] if len(parts) > 4 else ""
            position = int(claim.rpartition(":")[2]) if claim.rpartition(":")[2].isdigit() else -1
            runs[name].append({"start": stamp, "pid": int(parts[3]), "claim": position, "ticks": [], "end": None})
        elif not runs.get(name):
            garbled.append(line)
        elif kind == "tick":
            runs[name][-1]["ticks"].append((float(parts[3]), stamp))
        elif kind in ("end", "refused"):
            runs[name][-1].update(end=stamp, rc=int(parts[3]), refused=kind == "refused")
        else:
            garbled.append(line)
    return runs, garbled


def tick_overlaps(runs: dict[str, list[dict[str, Any]]]) -> tuple[list[dict[str, Any]], float, int]:
    """Violations of the claims' tick order per config; the longest check-to-line gap; ticks seen."""
    by_config: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    exposure, count = 0.0, 0
    for name, rs in runs.items():
        m = STEP_NAME.match(name)
        config = m["config"] if m else name
        for r in rs:
            for checked, written in r["ticks"]:
                by_config[config][r["claim"]].append(checked)
                exposure = max(exposure, written - checked)
                count += 1
    found = []
    for config, claims in by_config.items():
        latest_before, holder = -math.inf, None
        for position in sorted(claims):
            first, last = min(claims[position]), max(claims[position])
            if first <= latest_before:
                found.append({"config": config, "claim": position, "ticked_at": first, "after": holder,
                              "whose_last_tick": latest_before})  # fmt: skip
            if last > latest_before:
                latest_before, holder = last, position
    return found, exposure, count


class NemesisChecks:
    """The checks of a settled nemesis run (a part of nemesis.Nemesis)."""

    def json_of(self, args: list[str]) -> Any:
        rc, out, err = self.cli(self.hosts[0], [*args, "-o", "json"])
        if rc not in (0, 1):
            raise RuntimeError(f"rollouts {' '.join(args)} exited {rc}: {err.strip()[-500:]}")
        return json.loads(out)

    def check(self, settled: bool) -> dict[str, Any]:
        verdict: Verdict = self.verdict
        events = self.json_of(["events"])
        history = {name: self.json_of(["rollout", "history", name]) for name in self.configs}
        runs, garbled = parse_gt(self.gt)
        for name, rs in runs.items():
            if len(rs) > 1:
                verdict.add("duplicates", {"name": name, "starts": len(rs)})
        overlaps, exposure, ticks = tick_overlaps(runs)
        for item in overlaps:
            verdict.add("tick_overlaps", item)
        self.check_completions(verdict, runs, events, history)
        unknown = self.check_acknowledged(verdict, events, history)
        self.check_end_state(verdict)
        for h in self.hosts:
            path = h.home / "runtime" / "claimant"
            h.claimant = path.read_text().strip() if path.exists() else None
        stops = self.stop_times(runs, events)
        for name, rs in runs.items():
            if rs[-1]["end"] is None and name not in self.deaths:
                verdict.add("unstopped", name)
        windows = Counter(w.kind for w in self.windows)
        codes = Counter(f"{op.kind}:{op.rc}" for op in self.ops)
        return {
            "seed": self.args.seed,
            "hosts": len(self.hosts),
            "lease_s": self.lease,
            "rollouts": self.versions,
            "ops": len(self.ops),
            "fault_windows": sum(windows.values()),
            "fault_windows_by_kind": dict(sorted(windows.items())),
            "backends_terminated": sum(w.detail.get("backends", 0) for w in self.windows),
            "violations": {k: verdict.count(k) for k in VIOLATIONS if verdict.count(k)},
            **{k: verdict.count(k) for k in VIOLATIONS},
            "settled": settled,
            "gt_runs": sum(len(rs) for rs in runs.values()),
            "gt_ticks": ticks,
            "gt_refused": sum(1 for rs in runs.values() for r in rs if r.get("refused")),
            "gt_garbled": len(garbled),
            "controller_exits_5": self.counts["controller_exits_5"],
            "completes": sum(1 for rows in history.values() for r in rows if r["phase"] == "Complete"),
            "longest_check_to_tick_s": round(exposure, 3),
            **unknown,
            **stops,
            "exit_codes": dict(sorted(codes.items())),
            "seconds": round(self.elapsed(), 1),
        }

    def elapsed(self) -> float:
        import time

        return time.monotonic() - self.started

    def check_completions(
        self, verdict: Verdict, runs: dict[str, list[dict[str, Any]]], events: list[Any], history: dict[str, Any]
    ) -> None:
        """I7 from GT: a Complete deployment's deployer ran under its completing claim and exited 0."""
        claims: dict[tuple[str, int, int], int] = {}
        for e in events:
            if e["type"] == "DeployerClaimed":
                claims[(e["config"], e["version"], e["data"]["attempt"])] = e["position"]
        for config, rows in history.items():
            for row in rows:
                if row["phase"] != "Complete":
                    continue
                position = claims.get((config, row["version"], row["attempt"]))
                base = f"{config}-{row['version']}-deploy-{row['attempt']}"
                names = [n for n in runs if n == base or n.startswith(f"{base}-step-")]
                last = max(names, key=lambda n: int(n.rpartition("-")[2]) if "-step-" in n else 0, default=base)
                ok = [r for r in runs.get(last, []) if r["claim"] == position and r["end"] is not None
                      and r.get("rc") == 0 and not r.get("refused")]  # fmt: skip
                if not ok:
                    verdict.add("completed_without_exit0", {"deployer": last, "claim": position})

    def check_acknowledged(self, verdict: Verdict, events: list[Any], history: dict[str, Any]) -> dict[str, int]:
        """Acknowledged writes are in the log, refused ones are not; unknown outcomes are said as such."""
        by_actor: dict[str, list[Any]] = defaultdict(list)
        for e in events:
            by_actor[e.get("actor") or ""].append(e)
        unknown = [op for op in self.ops if op.rc is None or op.rc == 5 or op.rc < 0]
        known = [op for op in self.ops if op not in unknown]
        shadow = _Known(known, self.ops)
        scratch = Verdict()
        Checks.check_writes(shadow, scratch, {"events": events, "history": history})  # type: ignore[arg-type]
        unknown_versions = {(e["config"], e["version"]) for op in unknown for e in by_actor.get(op.actor, [])}
        for kind, items in scratch.details.items():
            for item in items:
                if isinstance(item, dict) and tuple(item.get("version_nobody_printed") or ()) in unknown_versions:
                    continue  # a version its client could not know it made
                verdict.add(kind, item)
        for op in known:
            if op.kind == "approve" and op.rc == 0 and not any(e["type"] == "Approved" for e in by_actor[op.actor]):
                verdict.add("lost_writes", {"op": op.id, "args": op.args, "out": op.out})
        committed = 0
        for op in unknown:
            mine = by_actor.get(op.actor, [])
            committed += bool(mine)
            said = op.err.lower()
            if mine and op.rc == 5 and not any(word in said for word in UNKNOWN_WORDS):
                verdict.add("unknown_reported_failed", {"op": op.id, "rc": op.rc, "err": op.err.strip()[-300:],
                                                        "committed": bool(mine)})  # fmt: skip
        return {"unknown_outcomes": len(unknown), "unknown_committed": committed}

    def check_end_state(self, verdict: Verdict) -> None:
        host = self.hosts[0]
        rc, out, err = self.cli(host, ["audit", "-o", "json"])
        if rc != 0:
            verdict.add("audit", (out or err)[-2000:])
        rc, out, err = self.cli(host, ["log", "verify"])
        if rc != 0:
            verdict.add("log_verify", (out or err)[-1000:])
        names = [row["name"] for row in self.json_of(["projections", "status"])]
        rc, out, err = self.cli(host, ["projections", "diff", *names])
        if rc != 0:
            verdict.add("projections_diff", (out or err)[-1000:])

    def stop_times(self, runs: dict[str, list[dict[str, Any]]], events: list[Any]) -> dict[str, Any]:
        """From a host's last lease renewal to its deployer's stop (deployers that wrote no `end`)."""
        # Whose the deployer was: its attempt's claimant when it was created (a ClaimTaken hands a paused
        # attempt to another controller, under the same claim position).
        holder: dict[tuple[str, int], str] = {}
        claimant_of: dict[str, str] = {}
        for e in sorted(events, key=lambda e: e["position"]):
            key = (e["config"], e["version"])
            if e["type"] in ("DeployerClaimed", "ClaimTaken") and e["data"].get("claimant"):
                holder[key] = e["data"]["claimant"]
            elif e["type"] == "DeployerCreated" and e["data"].get("name") and key in holder:
                claimant_of[e["data"]["name"]] = holder[key]
        host_of = {h.claimant: h.index for h in self.hosts if h.claimant}
        worst, worst_paused, counted = 0.0, 0.0, 0
        example: dict[str, Any] = {}
        longest: list[dict[str, Any]] = []  # the five longest stops outside a pause, with the windows around them
        for name, rs in runs.items():
            r = rs[-1]
            died = self.deaths.get(name)
            if r["end"] is not None or died is None:
                continue
            claimant = claimant_of.get(name)
            before = [t for t in self.renewals.get(claimant or "", []) if t <= died]
            if not before:
                continue
            stop = died - before[-1]
            index = host_of.get(claimant)
            paused = any(w.kind == "pause" and w.host == index and w.start < died and w.end > before[-1]
                         for w in self.windows)  # fmt: skip
            counted += 1
            if paused:
                worst_paused = max(worst_paused, stop)
            else:
                around = [
                    f"{w.kind}@{w.host}" for w in self.windows if w.start < died and w.end > before[-1] - self.lease
                ]
                longest = sorted([*longest, {"deployer": name, "host": index, "s": round(stop, 2), "windows": around}],
                                 key=lambda x: -x["s"])[:5]  # fmt: skip
                if stop > worst:
                    worst, example = stop, {"deployer": name, "host": index}
        lease = self.lease
        return {
            "stop_after_last_renewal_max_s": round(worst, 2),
            # the shims kill at L/2 from the last renewal (the heartbeat carries the renewal's boot clock
            # reading), and a shim looks every min(0.5, L/16) s: DESIGN 7.7's half lease, plus one look,
            # plus this harness's own look for the deployer's death (every WATCH_S)
            "stop_bound_s": round(lease / 2 + min(0.5, lease / 16) + WATCH_S, 2),
            "stop_after_last_renewal_example": example,
            "stop_after_last_renewal_longest": longest,
            "stop_after_last_renewal_paused_max_s": round(worst_paused, 2),
            "stops_measured": counted,
        }


class _Known:
    """What Checks.check_writes reads of a run: its ops (here those whose outcome their client knows)."""

    def __init__(self, ops: list[Op], all_ops: list[Op]) -> None:
        self.ops = ops
        self.all_ops = all_ops  # when each command ran, whatever its outcome
