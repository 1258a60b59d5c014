"""`rollouts log ...`: checking the log's hash chain against what was written."""

from __future__ import annotations

import click

from adapters.cli.output import emit_json, output_option
from adapters.cli.params import expected_head
from adapters.cli.state import State, pass_reader


@click.group()
def log() -> None:
    """Check the event log itself: its hash chain and its identity.

    \b
    Example:
      rollouts log verify
      rollouts log verify --expect-head 42:9f86d0...
    """


@log.command()
@click.option(
    "--expect-head",
    callback=expected_head,
    metavar="POSITION:HASH",
    help="Also fail unless the log still holds this position with this hash (a head printed earlier).",
)
@output_option
@pass_reader
def verify(state: State, expect_head: tuple[int, str] | None, output: str) -> None:
    """Recompute the hash chain from position zero; exit 1 if any event was changed.

    Every event's hash covers its whole stored record and the hash before it, so an
    event edited, removed, inserted or reordered after it was written breaks the chain
    at that position. A truncated tail leaves a shorter chain that still verifies:
    keep the printed head elsewhere and pass it to --expect-head to catch that too.

    \b
    Example:
      rollouts log verify
      rollouts log verify --expect-head 1200:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
      rollouts log verify -o json
    """
    from adapters.chain import Break
    from adapters.verify import verify_log

    recorder = state.recorder
    verdict = verify_log(recorder, keep=expect_head[0] if expect_head else None)
    breaks = list(verdict.breaks)
    if expect_head is not None:
        position, digest = expect_head
        found = verdict.hash_at.get(position)
        if found is None:
            breaks.append(Break(position, f"expected head {position} is gone: the log ends at {verdict.head}"))
        elif found != digest:
            breaks.append(Break(position, f"expected head {position} has another hash: {found}"))
    log_id = recorder.log_id()
    if output == "json":
        emit_json(
            {
                "ok": not breaks,
                "events": verdict.events,
                "unchained": verdict.unchained,
                "head": verdict.head,
                "head_hash": verdict.head_hash,
                "log_id": log_id,
                "violations": [b.as_dict() for b in breaks],
            }
        )
    elif breaks:
        for b in breaks:
            click.echo(f"BROKEN at position {b.position}: {b.problem}")
    else:
        unchained = f" ({verdict.unchained} written before the chain)" if verdict.unchained else ""
        click.echo(f"ok: {verdict.events} events{unchained}, head {verdict.head} {verdict.head_hash}, log {log_id}")
    if breaks:
        raise click.exceptions.Exit(1)
