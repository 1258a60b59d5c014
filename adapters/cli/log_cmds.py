"""`rollouts log ...`: checking the log's hash chain against what was written."""

from __future__ import annotations

from typing import Any

import click

from adapters.cli.output import emit_json, output_option
from adapters.cli.params import expected_head
from adapters.cli.state import State, pass_log_reader, pass_state
from adapters.cli.types import POSITION


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
@pass_log_reader
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


@log.command()
@click.option("--after", type=POSITION, default=0, help="Only events after this position.")
@click.option("--until", type=POSITION, help="Only events up to this position.")
@pass_log_reader
def export(state: State, after: int, until: int | None) -> None:
    """Write the log as JSON Lines on stdout, one event a line, in position order.

    Each line has position, stream, stream_version, type, timestamp, data,
    meta and hash as people read them, and topic and state as the log
    stores them, so that `rollouts log import` can rebuild the same log,
    hashes included, in another store.

    \b
    Example:
      rollouts log export > web.jsonl
      rollouts log export --after 1200 | jq -c 'select(.type == "DeployerFailed")'
    """
    from adapters.log_transfer import export_lines

    if until is not None and until < after:
        raise click.BadParameter("--until is before --after", param_hint="--until")
    head = state.recorder.max_notification_id() or 0
    for flag, position in (("--after", after), ("--until", until)):
        if position is not None and position > head:
            raise click.BadParameter(f"position {position} is beyond the head of the log ({head})", param_hint=flag)
    out = click.get_binary_stream("stdout")
    with _progress(min(head, until or head) - after, "exporting") as step:
        for line in export_lines(state.recorder, after, until):
            out.write(line)
            step(1)


@log.command(name="import")
@click.argument("source", type=click.File("r", lazy=True))
@pass_state
def import_(state: State, source: Any) -> None:
    """Load an exported log (a file, or - for stdin) into an EMPTY store.

    Every line is checked as it is read, in one transaction: its hash must
    chain from the line before it and its readable fields must say what its
    stored record says. Any change refuses the whole file (exit 1) and
    nothing is written; so is a file whose events this program cannot read
    (a time without its offset, a topic of no event of ours). The new store
    keeps the log's id, positions, order, streams, versions, data, metadata
    and hashes (events the old log held before its chain stay unchained):
    `rollouts log verify` prints the same head on both. This is how a SQLite
    log moves to PostgreSQL.

    \b
    Example:
      rollouts log export > log.jsonl
      rollouts --store postgresql://rollouts@db/rollouts --home ~/.rollouts-pg log import log.jsonl
    """
    from adapters.log_transfer import load

    with _progress(_size(source), "importing", least=4_000_000) as step:  # bytes: ~10,000 lines
        found = load(state.app.recorder, _reported(source, step))
    before = f" ({found.unchained} written before the chain)" if found.unchained else ""
    click.echo(f"imported {found.events} events{before}, head {found.head} {found.head_hash}, log {found.log_id}")


def _size(source: Any) -> int:
    """A file's size in bytes, for the progress bar (0 for a pipe: no bar)."""
    import os

    try:
        return os.fstat(source.fileno()).st_size
    except (OSError, AttributeError, ValueError):
        return 0


def _reported(lines: Any, step: Any) -> Any:
    """The lines, each reported to the progress bar by its length (at most its size in bytes)."""
    for line in lines:
        step(len(line))
        yield line


def _progress(total: int, label: str, least: int = 10_000) -> Any:
    """A progress bar on a terminal's stderr for long work (`total` of at least `least`); elsewhere a no-op step."""
    import contextlib
    import sys

    if not sys.stderr.isatty() or total < least:
        return contextlib.nullcontext(lambda _: None)

    @contextlib.contextmanager
    def bar() -> Any:
        with click.progressbar(length=total, label=label, file=sys.stderr) as shown:
            yield shown.update

    return bar()
