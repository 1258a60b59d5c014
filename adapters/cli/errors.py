"""The CLI edge: exceptions become one `error:` line and the exit code of DESIGN section 7."""

from __future__ import annotations

import sys

import click

from domain.errors import DomainError, NotFound

USAGE, REFUSED, CONFLICT, MISSING, STORE = 2, 1, 3, 4, 5


def exit_code_for(error: BaseException) -> int:
    from adapters.application import WriteConflict
    from adapters.eventstore import StoreUnavailable
    from adapters.failures import disk_problem
    from adapters.store_url import BadStoreURL

    if disk_problem(error) is not None:
        return STORE
    if isinstance(error, NotFound):
        return MISSING
    if isinstance(error, DomainError):
        return REFUSED
    if isinstance(error, WriteConflict):
        return CONFLICT
    if isinstance(error, StoreUnavailable):
        return STORE
    if isinstance(error, BadStoreURL | ValueError):
        return USAGE
    return REFUSED


def message_for(error: BaseException) -> str:
    from adapters.failures import disk_problem

    problem = disk_problem(error)
    if problem is not None:
        return f"cannot use the disk or the store (full or failing): {problem}"
    text = " ".join(str(error).split())
    if not text or exit_code_for(error) == REFUSED and not isinstance(error, DomainError):
        text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text


def run(cli: click.Group, argv: list[str] | None) -> int:
    try:
        result = cli.main(args=argv, prog_name="rollouts", standalone_mode=False)
    except click.exceptions.Exit as done:
        return done.exit_code
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
        click.echo(f"error: {message_for(error)}", err=True)
        return exit_code_for(error)
    sys.stdout.flush()
    return result if isinstance(result, int) else 0
