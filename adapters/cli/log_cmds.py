"""`rollouts log ...`: checking the log's hash chain against what was written."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import IO, TYPE_CHECKING

import click

from ..service.moves import ending, origin_of
from ..service.moves import seal as seal_log
from ..store.chain import Break, ChainVerdict
from ..store.transfer import export_lines, load
from ..store.verify import seen_by_home, verify_log
from .output import emit_json, output_option
from .params import expected_head
from .state import State, pass_log_reader, pass_state
from .types import POSITION, TEXT

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ..store.checkpoint import Checkpoint

Advance = Callable[[int], None]  # reports progress by so much


@click.group()
def log() -> None:
    """Check the event log itself (its hash chain and its identity), and move it.

    \b
    Example:
      rollouts log verify
      rollouts log verify --expect-head 42:9f86d0...
      rollouts log export --seal > log.jsonl
    """


@log.command()
@click.option(
    "--expect-head",
    callback=expected_head,
    metavar="POSITION:HASH",
    help="Also fail unless the log still holds this position with this hash (a head printed earlier).",
)
@click.option(
    "--checkpoint",
    type=click.File("r"),
    help="Also fail unless this signed checkpoint (from `log checkpoint`) is good and the log still holds it.",
)
@click.option(
    "--pubkey",
    type=click.File("rb"),
    help="The Ed25519 public key (PEM) whose signature --checkpoint must carry.",
)
@output_option
@pass_log_reader
def verify(
    state: State, expect_head: tuple[int, str] | None, checkpoint: IO[str] | None, pubkey: IO[bytes] | None, output: str
) -> None:
    """Recompute the hash chain from position zero; exit 1 if any event was changed.

    Every event's hash covers its whole stored record and the hash before it, so an
    event edited, removed, inserted or reordered after it was written breaks the chain
    at that position; so does an event without its hash. In a home bound to the log,
    the head the home has seen (position and hash) must still be there: a log put
    back shorter, or replaced by another whose chain holds on its own, fails. Elsewhere
    a truncated tail leaves a shorter chain that still verifies: keep the printed head
    and pass it to --expect-head to catch that too.

    \b
    Example:
      rollouts log verify
      rollouts log verify --expect-head 1200:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
      rollouts log verify -o json
      rollouts log verify --checkpoint web.checkpoint --pubkey auditor.pub.pem
    """

    signed = _checkpoint(checkpoint, pubkey)
    recorder = state.recorder
    log_id = recorder.log_id()
    held = signed and (signed.position, signed.hash)
    heads = [(name, *head) for name, head in (("expected head", expect_head), ("checkpoint", held)) if head]
    verdict = verify_log(recorder, keep=min(h[1] for h in heads) if heads else None)
    if len(heads) == 2 and heads[0][1] != heads[1][1]:  # the chain keeps one position's hash: ask for the other
        verdict.hash_at.update(verify_log(recorder, keep=max(h[1] for h in heads)).hash_at)
    breaks = verdict.breaks + seen_by_home(state.home.runtime, recorder)
    if signed is not None and signed.log_id != log_id:
        breaks.append(Break(signed.position, f"the checkpoint is of log {signed.log_id}, not of this log {log_id}"))
    breaks += _heads_gone(heads, verdict)
    if output == "json":
        emit_json(
            {
                "ok": not breaks,
                "events": verdict.events,
                "unchained": verdict.unchained,
                "head": verdict.head,
                "head_hash": verdict.head_hash,
                "log_id": log_id,
                "origin": origin_of(recorder),
                "sealed": recorder.sealed(),
                "violations": [b.as_dict() for b in breaks],
            }
        )
    elif breaks:
        for b in breaks:
            click.echo(f"BROKEN at position {b.position}: {b.problem}")
    else:
        click.echo(f"ok: {verdict.events} events, head {verdict.head} {verdict.head_hash}, log {log_id}")
        if signed is not None:
            when = signed.time.strftime("%Y-%m-%dT%H:%M:%SZ")
            click.echo(f"ok: checkpoint {signed.position} signed by {signed.key_name} at {when} holds")
    if breaks:
        raise click.exceptions.Exit(1)


def _heads_gone(heads: list[tuple[str, int, str]], verdict: ChainVerdict) -> list[Break]:
    """A break for each head given (`name`, position, hash) that the log no longer holds as it was."""
    found = []
    for name, position, digest in heads:
        at = verdict.hash_at.get(position)
        if at is None:
            found.append(Break(position, f"{name} {position} is gone: the log ends at {verdict.head}"))
        elif at != digest:
            found.append(Break(position, f"{name} {position} has another hash: {at}"))
    return found


def _checkpoint(text: IO[str] | None, pubkey: IO[bytes] | None) -> Checkpoint | None:
    """The checkpoint --checkpoint names, its signature checked with --pubkey; None without them."""
    if (text is None) != (pubkey is None):
        raise click.UsageError("--checkpoint and --pubkey go together")
    if text is None or pubkey is None:
        return None
    signing = _signing()
    try:
        key = signing.public_key(pubkey.read())
    except signing.CheckpointError as error:  # the wrong file given (a private key, say): not a broken log
        raise click.BadParameter(f"{pubkey.name}: {error}", param_hint="--pubkey") from None
    try:
        return signing.verified(text.read(), key)
    except signing.CheckpointError as error:
        raise click.exceptions.Exit(_refused(f"checkpoint {text.name}: {error}")) from None
    except UnicodeDecodeError:
        raise click.exceptions.Exit(_refused(f"checkpoint {text.name} is not text")) from None


def _signing() -> ModuleType:
    """adapters.checkpoint, for the commands that sign or check a checkpoint."""
    from ..store import checkpoint  # start-up cost: cryptography

    return checkpoint


def _refused(message: str) -> int:
    click.echo(f"BROKEN: {message}", err=True)
    return 1


@log.command()
@click.option(
    "--key",
    type=click.File("rb"),
    required=True,
    help="The Ed25519 private key (PEM, as `openssl genpkey -algorithm ed25519` writes it) that signs.",
)
@click.option("--name", default="rollouts", show_default=True, help="The key's name in the signature line.")
@output_option
@pass_log_reader
def checkpoint(state: State, key: IO[bytes], name: str, output: str) -> None:
    """Print a signed checkpoint of the log's head: log id, position, hash, time, signature.

    The chain is verified first (a broken log is not signed: exit 1). Keep the
    checkpoint, and the public key, away from the log's store: later,
    `log verify --checkpoint FILE --pubkey PEM` proves, offline and to anyone
    with the public key, that the history up to it was not rewritten since,
    even by someone with the database's password. The text is a signed note
    (C2SP's signed-note format, the body shaped as a tlog checkpoint); see
    docs/security.md for where it differs.

    \b
    Example:
      openssl genpkey -algorithm ed25519 -out auditor.pem
      openssl pkey -in auditor.pem -pubout -out auditor.pub.pem
      rollouts log checkpoint --key auditor.pem --name auditor@example > web.checkpoint
      rollouts log verify --checkpoint web.checkpoint --pubkey auditor.pub.pem
    """
    from datetime import UTC, datetime

    signing = _signing()
    try:
        signer = signing.private_key(key.read())
    except signing.CheckpointError as error:
        raise click.BadParameter(str(error), param_hint="--key") from None
    verdict = verify_log(state.recorder)
    if verdict.breaks:
        first = verdict.breaks[0]
        raise click.exceptions.Exit(_refused(f"at position {first.position}: {first.problem}; not signed"))
    if not verdict.head or verdict.head_hash is None:
        raise click.BadParameter("the log has no events to sign", param_hint="--key")
    made = signing.Checkpoint(state.recorder.log_id(), verdict.head, verdict.head_hash, datetime.now(UTC), name)
    try:
        note = signing.sign(made, signer)
    except signing.CheckpointError as error:
        raise click.BadParameter(str(error), param_hint="--name") from None
    if output == "json":
        stamp = made.time.strftime("%Y-%m-%dT%H:%M:%SZ")
        fields = {"log_id": made.log_id, "position": made.position, "hash": made.hash, "time": stamp}
        emit_json({**fields, "key_name": name, "checkpoint": note})
    else:
        click.echo(note, nl=False)


@log.command()
@click.option("--after", type=POSITION, default=0, help="Only events after this position.")
@click.option("--until", type=POSITION, help="Only events up to this position.")
@click.option(
    "--seal",
    is_flag=True,
    help="Move the log: first append its seal (refused while a deployment is New, Pending or Running); from then on"
    " it refuses every write and claim. The export ends with the seal.",
)
@click.option("--reason", type=TEXT, help="Why the log is sealed (recorded in the seal).")
@pass_log_reader
def export(state: State, after: int, until: int | None, seal: bool, reason: str | None) -> None:
    """Write the log as JSON Lines on stdout, one event a line, in position order.

    Each line has position, stream, stream_version, type, timestamp, data,
    meta and hash as people read them, and topic and state as the log
    stores them, so that `rollouts log import` can rebuild the same events,
    hashes included, in another store.

    A plain export is a backup: importing it makes a copy that could run
    the same deployments again, so it imports only with --fork. To move a
    log, export it with --seal: the log appends its seal and refuses every
    write and claim from then on (a controller on it stops); the export
    holds every event up to and including the seal. The last line is the
    export's end marker (`end`, `log_id`, `events`, `head`, `chain`): a
    file cut short imports only with --fork.

    \b
    Example:
      rollouts log export > web.jsonl
      rollouts log export --seal --reason 'to PostgreSQL' > web.jsonl
      rollouts log export --after 1200 | jq -c 'select(.type == "DeployerFailed")'
    """

    if seal and (after or until is not None):
        raise click.BadParameter("a sealed export holds the whole log: no --after or --until", param_hint="--seal")
    if reason is not None and not seal:
        raise click.BadParameter("--reason goes with --seal", param_hint="--reason")
    recorder = state.recorder
    if seal:
        sealed = seal_log(state.app, reason, state.meta())
        recorder = state.app.recorder
        until = sealed.position
        click.echo(f"sealed: log {recorder.log_id()} at position {sealed.position}", err=True)
    if until is not None and until < after:
        raise click.BadParameter("--until is before --after", param_hint="--until")
    head = recorder.max_notification_id() or 0
    for flag, position in (("--after", after), ("--until", until)):
        if position is not None and position > head:
            raise click.BadParameter(f"position {position} is beyond the head of the log ({head})", param_hint=flag)
    out = sys.stdout.buffer  # (click.get_binary_stream is deprecated)
    with _progress(min(head, until or head) - after, "exporting") as step:
        for line in export_lines(recorder, after, until):
            out.write(line)
            step(1)


@log.command(name="import")
@click.argument("source", type=click.File("r", lazy=True))
@click.option(
    "--fork",
    is_flag=True,
    help="Import an export without a seal (a backup) as a new log; every deployment open in it fails there.",
)
@pass_state
def import_(state: State, source: IO[str], fork: bool) -> None:
    """Load an exported log (a file, or - for stdin) into an EMPTY store, as a new log.

    Every line is checked as it is read, in one transaction: its hash must
    chain from the line before it and its readable fields must say what its
    stored record says. Any change refuses the whole file (exit 1) and
    nothing is written, nothing made (no schema, no log id); so is a file
    whose events this program cannot read (a time without its offset, a
    topic of no event of ours). The new log keeps the events' positions,
    order, streams, versions, data, metadata and hashes, has an id of its
    own, and adds one event: its origin (the source's log id and head),
    chained on the imported ones. A controller on it goes on from there.

    An export made with `log export --seal` imports as it is (a move). One
    without its seal, or cut short (no end marker), is refused unless
    --fork: the source may still run its deployments, so --fork fails every
    deployment open in the copy, with a reason naming the fork. This is how
    a SQLite log moves to PostgreSQL.

    \b
    Example:
      rollouts log export --seal > log.jsonl
      rollouts --store postgresql://rollouts@db/rollouts --home ~/.rollouts-pg log import log.jsonl
      rollouts --home ~/.rollouts-copy log import --fork backup.jsonl
    """
    import shutil

    home_existed = state.home.path.exists()
    undo = state.backend.undo_of_opening()
    try:
        app = state.app
        with _progress(_size(source), "importing", least=4_000_000) as step:  # bytes: ~10,000 lines
            found = load(app.recorder, _reported(source, step), ending=ending(app, state.meta()), fork=fork)
    except BaseException:
        _close_unremembered(state)
        undo()  # a refused import leaves the target as it found it (DESIGN 7.3): not even a log id
        if not home_existed:
            shutil.rmtree(state.home.path, ignore_errors=True)
        raise
    if not found.ended:
        click.echo(f"warning: the file was cut after position {found.head} (it has no end marker)", err=True)
    before_chain = f" ({found.unchained} written before the chain)" if found.unchained else ""
    kind = "forked" if fork else "moved"
    click.echo(
        f"imported {found.events} events{before_chain} of log {found.log_id} (head {found.head} {found.head_hash});"
        f" {kind} into log {app.recorder.log_id()}"
    )


def _close_unremembered(state: State) -> None:
    """Close the store an import failed on, so that the home remembers no log of it (there is none)."""
    app = state.__dict__.pop("app", None)
    state.__dict__.pop("recorder", None)
    if app is not None:
        app.close()


def _size(source: IO[str]) -> int:
    """A file's size in bytes, for the progress bar (0 for a pipe: no bar)."""
    import os

    try:
        return os.fstat(source.fileno()).st_size
    except (OSError, AttributeError, ValueError):
        return 0


def _reported(lines: Iterable[str], step: Advance) -> Iterator[str]:
    """The lines, each reported to the progress bar by its length (at most its size in bytes)."""
    for line in lines:
        step(len(line))
        yield line


def _progress(total: int, label: str, least: int = 10_000) -> AbstractContextManager[Advance]:
    """A progress bar on a terminal's stderr for long work (`total` of at least `least`); elsewhere a no-op step."""
    import contextlib
    import sys

    if not sys.stderr.isatty() or total < least:
        return contextlib.nullcontext(lambda _: None)

    @contextlib.contextmanager
    def bar() -> Iterator[Advance]:
        with click.progressbar(length=total, label=label, file=sys.stderr) as shown:
            yield shown.update

    return bar()
