"""The notification sink of a chaos run (bench/chaos/run.py): what it received against the log.

A sink (bench/shared/sink_server.py) listens for every kind of change from before the first config. At
the end, each change of the final log must have arrived (`notifications_lost`, must be 0); a
change that arrived more than once counts in `notifications_duplicated`, allowed only with the
same key and body and at most once per controller kill; `notifications_misordered` counts
changes that arrived after a later one (must be 0). When an old copy of the log was put back
(--restore-log), or the log moved (--moves), what was sent before is compared only with itself:
that history is gone (or the sealed log could not record what it sent last), and its changes come
again from where the copy or the seal stood (`notifications_resent_after_restore`), under the key of
the log that sends them.
"""

from __future__ import annotations

from typing import Any

from bench.shared.sink_server import SinkServer
from rollouts.domain import phases
from rollouts.domain.notification import KINDS, kind_of

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
        if e["type"] not in DEPLOYMENT_EVENTS or e["config"] is None:  # (None: an analysis template's stream)
            continue
        before = phase.get(e["stream"])
        after = phases.phase_after(before, e["type"], e["data"])
        phase[e["stream"]] = after
        kind = kind_of(before, e["type"], after, e["data"])
        if kind is not None:
            attempt = e["data"].get("attempt", 1) if e["type"] != "Created" else 1
            found.append((e["position"], kind, e["config"], e["version"], attempt, after))
    return found


def check(sink: SinkServer, events: list[dict[str, Any]], log_ids: set[str], cuts: list[int]) -> dict[str, Any]:
    """What the sink received against the final log's changes. `cuts`: the sink's requests before each
    restore of an old copy or move of the log; each part between them is checked on its own (a restore
    forgets what was sent, a move sends again what the sealed log could no longer record as sent).
    A key names the log that sent it: one of `log_ids`."""
    got = sink.delivered()
    bounds = [sum(1 for r in sink.received[:cut] if r.ok) for cut in cuts]
    parts = [got[lo:hi] for lo, hi in zip([0, *bounds], [*bounds, len(got)], strict=True)]
    want = expected(events)
    arrived = {tuple(r.body[f] for f in FIELDS) for r in got}
    lost = [w for w in want if w not in arrived]
    duplicated, misordered, bad_keys, resent = 0, 0, 0, 0
    sent_before: set[tuple[str, str]] = set()
    for part in parts:
        seen: dict[tuple[str, str], int] = {}
        last = 0
        for r in part:
            log_id, _, rest = r.key.partition(":")
            if log_id not in log_ids or rest != f"{r.body['position']}:{NAME}":
                bad_keys += 1
            ident = (r.key, repr(sorted(r.body.items())))
            change = ("", repr(sorted(r.body.items())))
            resent += change in sent_before and ident not in seen
            if ident in seen:
                duplicated += 1
                continue
            seen[ident] = r.body["position"]
            if r.body["position"] < last:
                misordered += 1
            last = r.body["position"]
        sent_before |= {("", repr(sorted(r.body.items()))) for r in part}
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
