"""Parameter callbacks shared by commands: a config NAME, an ISO time, a log head; bad input is a usage error."""

from __future__ import annotations

import re

import click

from ...domain.errors import NotFound
from ...domain.names import validate_name
from ...domain.times import utc_text
from . import completion

_HEAD = re.compile(r"([0-9]{1,18}):([0-9a-f]{64})")


def valid_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A config NAME: a DNS-1123 label of at most 63 characters."""

    if value is None:
        return None
    try:
        return validate_name(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


name_argument = click.argument("name", callback=valid_name, shell_complete=completion.configs)


def existing_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A config NAME a write acts on: where there is no log yet there is no such config, said before
    the write opens the store (opening it made the home and a log for a command then refused)."""
    name = valid_name(ctx, param, value)
    state = ctx.find_root().obj  # the State: the root group made it before this command's parameters are read
    if name is not None and state is not None and state.home.usable() and state.store_has_no_log():
        state.refuse_making_a_log()  # a home bound to a log its store no longer holds says that first (exit 5)
        raise NotFound(f"config {name!r} not found")
    return name


existing_name_argument = click.argument("name", callback=existing_name, shell_complete=completion.configs)


def iso_utc(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`--since`: an ISO time; without an offset it is UTC."""
    if value is None:
        return None
    try:
        return utc_text(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO time like 2026-01-31T12:00:00") from None


def expected_head(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, str] | None:
    """`--expect-head POSITION:HASH`: a head `log verify` printed earlier."""
    if value is None:
        return None
    match = _HEAD.fullmatch(value.strip().lower())
    if not match:
        raise click.BadParameter(f"{value!r} is not POSITION:HASH (a position, a colon, 64 hex digits)")
    return int(match[1]), match[2]
