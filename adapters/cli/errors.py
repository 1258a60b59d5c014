"""The CLI edge: exceptions become one `error:` line and the exit code of DESIGN section 7.

Errors are told apart by type, in one table (`EXIT_CODES`); what the operating system or a
database driver raises is sorted by its code (adapters/store/failures). Anything else is a bug: exit 70
(EX_SOFTWARE) with its traceback saved to a file whose path the error line gives.
"""

from __future__ import annotations

import contextvars
import os
import sqlite3
import sys
import tempfile
import traceback
from datetime import UTC, datetime
from pathlib import Path

import click

from ...domain.errors import Conflict, DomainError, NotFound, RolloutsError, StoreProblem, UsageError
from ..store.failures import disk_problem, is_lock_timeout, not_utf8, unusable_store

REFUSED, USAGE, CONFLICT, MISSING, STORE, INTERNAL = 1, 2, 3, 4, 5, 70

# The one table: each kind of error the program raises on purpose, and its exit code.
EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (UsageError, USAGE),
    (DomainError, REFUSED),
    (Conflict, CONFLICT),
    (NotFound, MISSING),
    (StoreProblem, STORE),
)

# The home of the command being run, once the root group knows it: where a crash report goes.
crash_home: contextvars.ContextVar[Path | None] = contextvars.ContextVar("crash_home", default=None)


def exit_code_for(error: BaseException) -> int:
    if disk_problem(error) is not None:
        return STORE
    for kind, code in EXIT_CODES:
        if isinstance(error, kind):
            return code
    if unusable_store(error) or not_utf8(error) is not None:
        return STORE
    if _is_driver_error(error) and is_lock_timeout(error):
        return CONFLICT
    return INTERNAL


def _is_driver_error(error: BaseException) -> bool:
    from eventsourcing.persistence import PersistenceError

    return isinstance(error, sqlite3.Error | PersistenceError)


def message_for(error: BaseException) -> str:
    problem = disk_problem(error)
    if problem is not None:
        return f"cannot use the disk or the store (full or failing): {problem}"
    column = not_utf8(error)
    if column is not None:
        return (
            f"the log holds text that is not UTF-8 (column {column}): it was edited by hand;"
            " 'rollouts log verify' shows where"
        )
    text = " ".join(str(error).split())
    if not text or not isinstance(error, RolloutsError):  # an OSError or a driver's error: say which
        text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text


def no_colour() -> bool:
    """NO_COLOR (https://no-color.org): set and not empty, no ANSI colour or style anywhere."""
    return bool(os.environ.get("NO_COLOR"))


def _help_for_bare(ctx: click.Context) -> int:
    """A group named without a subcommand prints its whole help, not a squashed error line:
    `rollouts` alone asked for nothing wrong (stdout, exit 0); `rollouts config` lacks its verb
    (stderr, exit 2: a usage error, click's convention)."""
    if ctx.parent is None:
        click.echo(ctx.get_help(), color=ctx.color)
        return 0
    click.echo(ctx.get_help(), err=True, color=ctx.color)
    return USAGE


def crash_report(error: BaseException) -> Path:
    """Write `error`'s traceback to a private file in the home's runtime/ (else a temporary file); its path."""
    text = "".join(traceback.format_exception(error))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    home = crash_home.get()
    folder = home / "runtime" if home is not None else None
    if folder is not None and folder.is_dir():
        path = folder / f"crash-{stamp}-{os.getpid()}.txt"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError:
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            return path
    fd, name = tempfile.mkstemp(prefix=f"rollouts-crash-{stamp}-", suffix=".txt")  # 0600
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return Path(name)


def internal_error(error: BaseException) -> str:
    """The one line for a bug: what it was, and where its traceback went."""
    what = " ".join(f"{type(error).__name__}: {error}".split())
    try:
        where = f"details in {crash_report(error)}"
    except OSError as failed:
        where = f"no details saved ({' '.join(str(failed).split())})"
    return f"internal error ({what}); {where}"


def run(cli: click.Group, argv: list[str] | None) -> int:
    crash_home.set(None)
    colour = False if no_colour() else None  # None: click decides, as when it is not given
    try:
        result = cli.main(args=argv, prog_name="rollouts", standalone_mode=False, color=colour)
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.exceptions.NoArgsIsHelpError as bare:
        return _help_for_bare(bare.ctx)
    except click.UsageError as error:
        hint = f" (see '{error.ctx.command_path} --help')" if error.ctx else ""
        click.echo(f"error: {' '.join(error.format_message().split())}{hint}", err=True)
        return error.exit_code
    except click.ClickException as error:
        click.echo(f"error: {' '.join(error.format_message().split())}", err=True)
        return error.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("error: interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as error:  # noqa: BLE001 - the one place errors reach the user
        code = exit_code_for(error)
        click.echo(f"error: {internal_error(error) if code == INTERNAL else message_for(error)}", err=True)
        return code
    sys.stdout.flush()
    return result if isinstance(result, int) else 0
