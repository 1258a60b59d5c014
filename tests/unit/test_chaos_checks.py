"""The chaos runner's write checks (bench/chaos/checks.py) on hand-made logs: what counts as a lost write."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the checkout, where `bench` is
from bench.chaos import run as chaos  # noqa: E402

T0 = 1_800_000_000.0


def event(position: int, kind: str, actor: str, at: float, version: int = 2) -> dict[str, Any]:
    stamp = datetime.fromtimestamp(at, UTC).isoformat()
    return {"position": position, "type": kind, "actor": actor, "timestamp": stamp, "config": "web", "version": version}


def lost_writes(ops: list[chaos.Op], events: list[dict[str, Any]]) -> list[Any]:
    verdict = chaos.Verdict()
    live = {"events": events, "history": {"web": [{"version": 2}]}}
    chaos.Chaos.check_writes(SimpleNamespace(ops=ops, all_ops=ops), verdict, live)  # type: ignore[arg-type]
    return verdict.details.get("lost_writes", [])


def command(kind: str, ident: int, t1: float, out: str) -> chaos.Op:
    """An op of `kind` that ran from t1 - 0.2 to t1 (on the harness's clock), exited 0 and printed `out`."""
    op = chaos.Op(ident, kind, "web", ["rollout", kind, "web"], actor=f"chaos-op-{ident}", rc=0)
    op.out, op.t0, op.t1 = out, t1 - 0.2, t1
    return op


def cancel(ident: int, t1: float) -> chaos.Op:
    return command("cancel", ident, t1, "cancel requested for web version 2\n")


TRIGGER = chaos.Op(1, "latest", "web", ["rollout", "latest", "web"], actor="chaos-op-1", rc=0, revision=2)
TRIGGERED = event(1, "RolloutTriggered", "chaos-op-1", T0)


def test_a_cancel_that_found_its_cancel_already_requested_lost_nothing() -> None:
    events = [TRIGGERED, event(2, "CancelRequested", "chaos-op-2", T0 + 1)]
    assert lost_writes([TRIGGER, cancel(2, T0 + 1.1), cancel(3, T0 + 1.2)], events) == []


def test_a_cancel_acknowledged_with_no_cancel_in_the_log_is_a_lost_write() -> None:
    assert [w["op"] for w in lost_writes([TRIGGER, cancel(3, T0 + 1.2)], [TRIGGERED])] == [3]


def test_a_cancel_requested_only_after_the_command_ended_does_not_cover_it() -> None:
    events = [TRIGGERED, event(2, "CancelRequested", "chaos-op-2", T0 + 5)]
    assert [w["op"] for w in lost_writes([TRIGGER, cancel(3, T0 + 1.2), cancel(2, T0 + 5.1)], events)] == [3]


def retry(ident: int, t1: float) -> chaos.Op:
    return command("retry", ident, t1, "retrying web version 2\n")


def test_a_cancel_asked_before_a_retry_does_not_cover_a_cancel_after_it() -> None:
    events = [
        TRIGGERED,
        event(2, "CancelRequested", "chaos-op-2", T0 + 1),
        event(3, "RetryRequested", "chaos-op-4", T0 + 2),
    ]
    ops = [TRIGGER, cancel(2, T0 + 1.1), retry(4, T0 + 2.1), cancel(3, T0 + 3)]
    assert [w["op"] for w in lost_writes(ops, events)] == [3]


def test_a_cancel_asked_on_a_host_whose_clock_was_stepped_ahead_still_covers_a_later_cancel() -> None:
    """Seen in the nemesis (seed 24): host A's wall clock was 8 s ahead when its `cancel` asked; a
    `cancel` from host B began after A's was acknowledged, found the cancel asked, appended nothing and
    printed the version. The ask's timestamp lies after B's command ended; the log's order does not."""
    events = [TRIGGERED, event(2, "CancelRequested", "chaos-op-2", T0 + 9)]
    assert lost_writes([TRIGGER, cancel(2, T0 + 1.1), cancel(3, T0 + 1.5)], events) == []


def test_a_retry_stamped_in_the_past_still_ends_the_ask_it_follows() -> None:
    """The other way round: a retry from a host whose clock was stepped back, acknowledged before the
    cancel began, ends the earlier ask though its timestamp lies before it."""
    events = [
        TRIGGERED,
        event(2, "CancelRequested", "chaos-op-2", T0 + 1),
        event(3, "RetryRequested", "chaos-op-4", T0 - 5),
    ]
    ops = [TRIGGER, cancel(2, T0 + 1.1), retry(4, T0 + 2.1), cancel(3, T0 + 3)]
    assert [w["op"] for w in lost_writes(ops, events)] == [3]


def test_a_cancel_running_beside_a_retry_may_have_read_the_ask_before_it() -> None:
    events = [
        TRIGGERED,
        event(2, "CancelRequested", "chaos-op-2", T0 + 1),
        event(3, "RetryRequested", "chaos-op-4", T0 + 2.9),
    ]
    ops = [TRIGGER, cancel(2, T0 + 1.1), retry(4, T0 + 2.95), cancel(3, T0 + 3)]
    assert lost_writes(ops, events) == []


def test_a_cancel_that_wrote_its_own_request_is_not_lost_when_a_retry_follows_before_it_ends() -> None:
    """Seen in CI: `cancel` appended its CancelRequested, then another command's retry landed before the
    cancel command had exited (the cancel was done; the retry legitimately came after it)."""
    events = [
        TRIGGERED,
        event(2, "CancelRequested", "chaos-op-3", T0 + 1),
        event(3, "RetryRequested", "chaos-op-4", T0 + 1.05),
    ]
    assert lost_writes([TRIGGER, cancel(3, T0 + 1.1)], events) == []


def test_an_undo_that_said_skipped_lost_nothing_by_appending_nothing() -> None:
    """7.11: `rollout undo` onto the spec the config runs already prints `skipped rollback` and appends
    nothing (the check had counted it a lost write)."""
    skipped = command("undo", 2, T0 + 1.1, "web skipped rollback (the spec already matches revision 1)")
    assert lost_writes([TRIGGER, skipped], [TRIGGERED]) == []
    undone = command("undo", 3, T0 + 1.2, "web rolled back to revision 1 as version 3")
    assert [w["op"] for w in lost_writes([TRIGGER, undone], [TRIGGERED])] == [3]
