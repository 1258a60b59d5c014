"""The notification sink of a chaos run (bench/chaos.py): what it received against the log.

A sink (bench/sink_server.py) listens for every kind of change from before the first config. At
the end, each change of the final log must have arrived (`notifications_lost`, must be 0); a
change that arrived more than once counts in `notifications_duplicated`, allowed only with the
same key and body and at most once per controller kill; `notifications_misordered` counts
changes that arrived after a later one (must be 0). When an old copy of the log was put back
(--restore-log), what was sent before is compared only with itself: that history is gone, and
its changes come again from where the copy stood (`notifications_resent_after_restore`).
"""

from __future__ import annotations

from typing import Any

from sink_server import SinkServer

from domain import phases
from domain.notification import KINDS, kind_of

NAME = "chaos"
ENV = {"ROLLOUTS_NOTIFY_TIMEOUT": "1", "ROLLOUTS_NOTIFY_LEASE_SECONDS": "3"}
DEPLOYMENT_EVENTS = frozenset({"Created", "RetryRequested", *phases.ALLOWED_FROM})
FIELDS = ("position", "kind", "config", "version", "attempt", "phase")


def start() -> SinkServer:
    sink = SinkServer(delay_s=0.005)
    sink.__enter__()
    return sink


def add_argv(sink: SinkServer) -> list[str]:
    return ["notify", "add", NAME, "--url", sink.url, "--on", ",".join(KINDS)]


def expected(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The changes of the log (events -o json), folded with the phase table."""
    phase: dict[str, str | None] = {}
    found = []
    for e in sorted(events, key=lambda e: e["position"]):
        if e["type"] not in DEPLOYMENT_EVENTS:
            continue
        before = phase.get(e["stream"])
        after = phases.phase_after(before, e["type"], e["data"])
        phase[e["stream"]] = after
        kind = kind_of(before, e["type"], after)
        if kind is not None:
            attempt = e["data"].get("attempt", 1) if e["type"] != "Created" else 1
            found.append((e["position"], kind, e["config"], e["version"], attempt, after))
    return found


def check(sink: SinkServer, events: list[dict[str, Any]], log_id: str, restored_at: int | None) -> dict[str, Any]:
    got = sink.delivered()
    cut = len(got) if restored_at is None else sum(1 for r in sink.received[:restored_at] if r.ok)
    before, after = got[:cut], got[cut:]
    want = expected(events)
    arrived = {tuple(r.body[f] for f in FIELDS) for r in got}
    lost = [w for w in want if w not in arrived]
    duplicated, misordered, bad_keys, resent = 0, 0, 0, 0
    for part in (before, after):
        seen: dict[tuple[str, str], int] = {}
        last = 0
        for r in part:
            if r.key != f"{log_id}:{r.body['position']}:{NAME}":
                bad_keys += 1
            ident = (r.key, repr(sorted(r.body.items())))
            if ident in seen:
                duplicated += 1
                continue
            seen[ident] = r.body["position"]
            if r.body["position"] < last:
                misordered += 1
            last = r.body["position"]
    if restored_at is not None:
        sent_before = {(r.key, repr(sorted(r.body.items()))) for r in before}
        resent = sum(1 for r in after if (r.key, repr(sorted(r.body.items()))) in sent_before)
    return {
        "notifications": len(want),
        "notifications_lost": len(lost),
        "notifications_duplicated": duplicated,
        "notifications_misordered": misordered,
        "notifications_bad_keys": bad_keys,
        "notifications_resent_after_restore": resent,
        "lost_examples": lost[:5],
    }


def received_count(sink: SinkServer) -> int:
    return len(sink.received)
