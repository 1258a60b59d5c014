"""The chaos run's checks (bench/chaos/run.py): the settle, then ground truth, writes, freezes and views."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from bench.chaos import notify as chaos_notify  # bench/chaos/notify.py: the notification sink of the run
from bench.chaos.model import EXPECTED_TYPE, INTERNAL_ERROR, STALE_REFUSAL, STEP_NAME, WRITES, Op, Verdict, epoch
from bench.chaos.stages import AUTOMATIC


class Checks:
    """What a chaos run checks once it settled (a part of chaos.Chaos)."""

    @property
    def all_ops(self) -> list[Op]:
        """Every command of the run, whatever its outcome: check_writes reads when each ran."""
        return self.ops  # type: ignore[attr-defined, no-any-return]

    def settle(self, verdict: Verdict) -> bool:
        self.stop_controllers(kill=False)
        self.lift_freezes()
        argv = ["controller", "run", "--until-idle", "--interval", "0.05", "--timeout", "120", "-q"]
        for _ in range(5):  # a pause for a human does not keep until-idle running: promoted, then again
            self.settle_pauses()
            rc, _, err = self.cli(argv, actor="chaos-settle")
            if rc != 0 or not self.settle_pauses():
                break
        if rc == 0:
            return True
        verdict.add("settle", f"first until-idle exited {rc}: {err.strip()[-300:]}")
        for conf in self.configs:
            op = self.new_op("cancel", conf.name, ["rollout", "cancel", conf.name])
            self.run_op(op)
        rc, _, err = self.cli(argv, actor="chaos-settle")
        if rc != 0:
            verdict.add("settle", f"second until-idle exited {rc}: {err.strip()[-300:]}")
        return rc == 0

    def views(self) -> dict[str, Any]:
        """The read models as the CLI serves them (several readers at once: faster, and a race)."""
        with ThreadPoolExecutor(4) as pool:
            events = pool.submit(self.json_of, ["events"])
            configs = pool.submit(self.json_of, ["config", "list"])
            history = {c.name: pool.submit(self.json_of, ["rollout", "history", c.name]) for c in self.configs}
            return {
                "events": events.result(),
                "configs": configs.result(),
                "history": {name: f.result() for name, f in history.items()},
            }

    def check(self, verdict: Verdict) -> dict[str, Any]:
        deployers = self.json_of(["deployers", "list", "--all"])
        for row in deployers:
            if row["state"] in ("created", "running"):
                verdict.add("orphans", row)
        live = self.views()
        self.check_ground_truth(verdict, [*self.old_deployers, *deployers], live["events"], live["history"])
        self.check_copies(verdict, [*self.old_deployers, *deployers])
        self.check_writes(verdict, live)
        self.check_freezes(verdict, live["events"])
        self.check_stages(verdict, live["history"], live["configs"])
        rc, out, err = self.cli(["audit", "-o", "json"], timeout=900)
        audit_ok = rc == 0
        if not audit_ok:
            verdict.add("audit", out[-2000:] or err[-500:])
        equal = True
        for flags in ([], ["--shadow"]):
            rc, _, err = self.cli(["projections", "rebuild", *flags], timeout=900)
            if rc != 0:
                verdict.add("rebuild", f"rebuild {flags} exited {rc}: {err.strip()[-300:]}")
                equal = False
                continue
            again = self.views()
            for key in live:
                if again[key] != live[key]:
                    equal = False
                    verdict.add("views", f"{key} differs after `projections rebuild {' '.join(flags)}`")
        log_id = self.json_of(["log", "verify"])["log_id"]
        cuts = self.move_cuts if self.sink_restored_at is None else [self.sink_restored_at]
        # a log renamed by a rebind onto an older copy, or imported, names where it went on from (Origin)
        named = [e["data"] for e in live["events"] if e["type"] == "Origin"]
        origins = {d.get(k) for d in named for k in ("log_id", "source_log_id")}
        sent = chaos_notify.check(self.sink, live["events"], {log_id, *self.log_ids, *origins} - {None}, cuts)
        for change in sent.pop("lost_examples"):
            verdict.add("notifications_lost", change)
        return {"audit_ok": audit_ok, "views_equal_rebuild": equal, **sent}

    def check_ground_truth(
        self, verdict: Verdict, deployers: list[dict[str, Any]], events: list[Any], history: dict[str, list[Any]]
    ) -> None:
        runs: list[dict[str, Any]] = []
        unfinished: dict[str, list[dict[str, Any]]] = defaultdict(list)
        gone_from, gone_to = self.gone_runs or (0, 0)
        if self.gt.exists():
            for number, line in enumerate(self.gt.read_text().splitlines()):
                parts = line.split()
                if len(parts) < 3:
                    verdict.add("gt_garbled", line)
                    continue
                kind, name, stamp = parts[:3]
                rc = int(parts[3]) if len(parts) > 3 and parts[3].lstrip("-").isdigit() else None
                if kind == "start":
                    runs.append(
                        {"name": name, "start": float(stamp), "end": None, "gone": gone_from <= number < gone_to}
                    )
                    unfinished[name].append(runs[-1])
                elif unfinished[name]:
                    run = unfinished[name].pop()
                    run["end"], run["rc"] = float(stamp), rc
                else:
                    verdict.add("gt_garbled", line)
        runs += self.template_runs()  # --templates: a built-in provider's measurement, by its runtime row
        self.counts["gt_runs"] = len(runs)
        counts = Counter(r["name"] for r in runs)
        for name, n in counts.items():
            if n > 1:
                verdict.add("duplicates", {"name": name, "starts": n})
        ended = {row["name"]: epoch(row.get("ended_at")) for row in deployers}
        by_config: dict[str, list[tuple[float, float, str, bool]]] = defaultdict(list)
        for r in runs:
            m = STEP_NAME.match(r["name"])
            if not m:
                verdict.add("gt_garbled", r["name"])
                continue
            killed = r["end"] is None
            until = r["end"] if not killed else (ended.get(r["name"]) or math.inf)
            by_config[m["config"]].append((r["start"], until, r["name"], killed))
        for config, intervals in by_config.items():
            intervals.sort()
            alive_until, holder = -math.inf, ""
            for start, until, name, _killed in intervals:
                if start < alive_until:
                    verdict.add(
                        "overlaps",
                        {"config": config, "started": name, "at": start, "while_alive": holder, "until": alive_until},
                    )
                if until > alive_until:
                    alive_until, holder = until, name
        named: set[str] = set()
        for e in events:
            collect_names(e.get("data"), named)
        for name in {r["name"] for r in runs if not r["gone"]}:
            if name not in named:
                verdict.add("unlogged_runs", name)
        self.check_completed_runs(verdict, runs, events, history)
        self.check_steps(verdict, runs, events)

    def check_completed_runs(
        self, verdict: Verdict, runs: list[dict[str, Any]], events: list[Any], history: dict[str, list[Any]]
    ) -> None:
        """I7: a deployment Complete in the log had its own deployer run, started after its claim, and finish."""
        claimed = {
            (e["config"], e["version"], e["data"]["attempt"]): epoch(e["timestamp"]) or 0.0
            for e in events
            if e["type"] == "DeployerClaimed"
        }
        finished = defaultdict(list)
        for r in runs:
            if r["end"] is not None:
                finished[r["name"]].append(r["start"])
        for config, rows in history.items():
            for row in rows:
                if row["phase"] != "Complete":
                    continue
                at = claimed.get((config, row["version"], row["attempt"]), math.inf)
                name = f"{config}-{row['version']}-deploy-{row['attempt']}"
                if (row.get("step_count") or 1) > 1 or f"{name}-step-1" in finished:  # (its last step)
                    name = f"{name}-step-{row.get('step_count') or 1}"
                if not any(start >= at for start in finished.get(name, [])):
                    verdict.add("completed_without_run", {"deployer": name, "claimed_at": at})

    def check_freezes(self, verdict: Verdict, events: list[dict[str, Any]]) -> None:
        """claims_in_freeze: a claim whose config (or all) was frozen, by the freeze events before it in the
        log, at the claim's own timestamp (folded here on its own, apart from the audit's rule G1)."""
        frozen: dict[str | None, str | None] = {}  # config (None: all) -> until ("" for until unfreeze)
        for e in events:  # a freeze of all has no config
            if e["type"] == "Frozen":
                frozen[e["config"]] = e["data"].get("until") or ""
            elif e["type"] == "Unfrozen":
                frozen.pop(e["config"], None)
            elif e["type"] == "DeployerClaimed":
                at = datetime.fromisoformat(e["timestamp"])
                for key in (e["config"], None):
                    until = frozen.get(key)
                    if until is not None and (until == "" or at < datetime.fromisoformat(until)):
                        verdict.add("claims_in_freeze", {"position": e["position"], "config": e["config"], "by": key})
        self.counts["freezes"] = sum(1 for e in events if e["type"] == "Frozen")

    def check_exits(self, verdict: Verdict) -> None:
        """Errors outside the contract (a violation), and refusals by a phase rule (reported only)."""
        for op in self.ops:
            if op.rc is None or op.rc == 0:
                continue
            first = op.err.strip().splitlines()[0] if op.err.strip() else ""
            brief = {"op": op.id, "args": op.args[:4], "rc": op.rc, "err": op.err.strip()[-300:]}
            if op.rc == 1 and STALE_REFUSAL.search(first) and op.kind in WRITES:
                verdict.add("stale_refusals", brief)
            elif op.kind == "freeze" and op.rc == 2 and first.endswith("is not in the future") and late(op):
                verdict.add("late_freezes", {**brief, "seconds": round(op.t1 - op.t0, 1)})  # decided after its --until
            elif op.rc not in (1, 3, 4) or "Traceback" in op.err or INTERNAL_ERROR.match(first):
                verdict.add("cli_errors", brief)

    def check_writes(self, verdict: Verdict, live: dict[str, Any]) -> None:
        by_actor: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for e in live["events"]:
            by_actor[e.get("actor") or ""].append(e)
        in_history = {(c, row["version"]) for c, rows in live["history"].items() for row in rows}
        rollbacks = {(c, r["version"]) for c, rows in live["history"].items() for r in rows if r.get("rollback_of")}
        # 7.10: a stage's automatic promotions are the controller's too (nobody prints their versions)
        rollbacks |= {
            (c, r["version"]) for c, rows in live["history"].items() for r in rows if r.get("message") == AUTOMATIC
        }
        streams: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
        for e in sorted(live["events"], key=lambda e: e["position"]):
            streams[(e["config"], e["version"])].append(e)
        spans = {op.actor: (op.t0, op.t1) for op in self.all_ops}
        printed: set[tuple[str, int]] = set()
        for op in self.ops:
            if op.kind not in WRITES or op.rc is None:
                continue
            mine = by_actor.get(op.actor, [])
            types = Counter(e["type"] for e in mine)
            if op.rc != 0:
                if mine:
                    verdict.add("phantom_writes", {"op": op.id, "args": op.args, "rc": op.rc, "events": dict(types)})
                continue
            if op.revision is not None:
                printed.add((op.config, op.revision))  # type: ignore[arg-type]
                if (op.config, op.revision) not in in_history:
                    verdict.add("lost_writes", {"op": op.id, "args": op.args, "missing_version": op.revision})
                triggered = [e for e in mine if e["type"] == "RolloutTriggered"]
                if [e["version"] for e in triggered] != [op.revision]:
                    verdict.add(
                        "lost_writes", {"op": op.id, "args": op.args, "printed": op.revision, "events": triggered}
                    )
                if op.read_back is False:
                    verdict.add("lost_writes", {"op": op.id, "args": op.args, "not_read_back": op.revision})
            expected = EXPECTED_TYPE.get(op.kind) or ("SpecChanged" if op.updated else None)
            if op.kind == "undo" and "skipped rollback" in op.out:  # 7.11: the spec ran already, nothing appended
                expected = None
                if mine:
                    verdict.add("phantom_writes", {"op": op.id, "args": op.args, "out": op.out, "events": dict(types)})
            if op.kind == "cancel":  # per version it printed: asking again what is already asked writes nothing
                for version in not_cancel_requested(op, streams, spans):
                    verdict.add("lost_writes", {"op": op.id, "args": op.args, "out": op.out, "version": version})
            elif op.kind == "undo" and "skipped rollback" in op.out:
                pass  # 7.11: the spec was the revision's already: nothing to append, and none appended
            elif expected and not types[expected]:
                verdict.add("lost_writes", {"op": op.id, "args": op.args, "out": op.out, "events": dict(types)})
            if op.kind == "config_set" and not op.updated and mine:
                verdict.add("phantom_writes", {"op": op.id, "args": op.args, "out": op.out, "events": dict(types)})
        for version in sorted(in_history - printed - rollbacks):  # (a rollback: the controller's, or an abort's)
            verdict.add("phantom_writes", {"version_nobody_printed": version})


VIOLATION_COUNTS = (
    "duplicates",
    "sealed_not_refused",
    "move_failures",
    "copy_ran_twice",
    "completed_without_run",
    "restore_not_refused",
    "overlaps",
    "lost_writes",
    "phantom_writes",
    "unlogged_runs",
    "orphans",
    "cli_errors",
    "claims_in_freeze",
    "notifications_lost",
    "notifications_misordered",
    "notifications_bad_keys",
)


VIOLATION_FLAGS = ("audit_ok", "views_equal_rebuild", "settled")


def late(op: Op) -> bool:
    """Whether a freeze op ended after its own --until (a loaded machine: the command took that long)."""
    until = op.args[op.args.index("--until") + 1] if "--until" in op.args else None
    return until is not None and op.t1 >= datetime.fromisoformat(until).timestamp()


ASKED = ("CancelRequested", "AbortRequested")  # an abort asks for the cancel too


def not_cancel_requested(
    op: Op, streams: dict[tuple[str, int], list[dict[str, Any]]], spans: dict[str, tuple[float, float]]
) -> list[int]:
    """The versions a `rollout cancel` that exited 0 printed whose cancel the log does not hold: not its
    own CancelRequested (a retry by another command after it, even before this one ended, takes
    nothing away from it), nor one before it (or an abort) that no retry followed where the command
    could have read the log (a cancel of a deployment whose cancel is already requested is acknowledged
    and appends nothing). Where it could have read: after every event of a command that ended before it
    began, before every event of one that began after it ended (`spans`: each command's actor -> its
    start and end, on the harness's own clock). The log's order and the clients' times decide, never
    the events' timestamps: a host's wall clock may be stepped (bench/nemesis/run.py), and an ask stamped
    8 s in the future was still read by a command that began after it was acknowledged."""
    printed = [int(v) for v in re.findall(r"\d+", op.out.partition(" version ")[2])]
    missing = []
    for version in printed:
        events = streams.get((op.config, version), [])  # in log order
        if any(e["type"] == "CancelRequested" and e["actor"] == op.actor for e in events):
            continue
        if not asked_when_read(op, events, spans):
            missing.append(version)
    return missing if printed else [0]  # (no version printed: nothing to show for the exit 0)


def asked_when_read(op: Op, events: list[dict[str, Any]], spans: dict[str, tuple[float, float]]) -> bool:
    """Whether, at some point of `events` (one deployment's, in log order) where `op` could have read
    them, its last ask or retry was an ask."""
    earliest, latest = 0, len(events)  # op read events[:p] for some p in earliest..latest
    for i, e in enumerate(events):
        span = spans.get(e.get("actor") or "")
        if span is None:  # the controller's own events: no client's times
            continue
        if span[1] < op.t0:
            earliest = i + 1
        elif span[0] > op.t1:
            latest = min(latest, i)
    last = None
    for p in range(latest + 1):  # last: the last ask or retry in events[:p]
        if p > 0 and events[p - 1]["type"] in (*ASKED, "RetryRequested"):
            last = events[p - 1]["type"]
        if p >= earliest and last in ASKED:
            return True
    return False


def collect_names(value: Any, into: set[str]) -> None:
    """Every deployer or hook name mentioned anywhere in an event's data."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "name" and isinstance(item, str):
                into.add(item)
            else:
                collect_names(item, into)
    elif isinstance(value, list):
        for item in value:
            collect_names(item, into)
