"""The click face of a command's session: its options, its warnings on stderr, and the decorators that pass it."""

from __future__ import annotations

from collections.abc import Callable
from functools import update_wrapper
from typing import Concatenate, ParamSpec, TypeVar

import click

from ..service.session import HEALS as HEALS
from ..service.session import Session
from ..service.session import healing as healing

P = ParamSpec("P")
T = TypeVar("T")


def warn(text: str) -> None:
    click.echo(f"warning: {text}", err=True)


class State(Session):
    """The session of one command, built by the root group from --home, --store and --as; the policy
    (binding, scratch home, healing) is the service's, warnings go to stderr."""

    def __init__(self, home: str, store: str | None, actor: str, store_named: str = "--store") -> None:
        super().__init__(home, store, actor, warn, store_named=store_named)


pass_state = click.make_pass_decorator(State)


def pass_reader(f: Callable[Concatenate[State, P], T]) -> Callable[P, T]:
    """`pass_state` for a read command: on a missing home it reads without creating one; a view
    found broken by its queries is rebuilt and the command asked again."""

    def read_only(state: State, *args: P.args, **kwargs: P.kwargs) -> T:
        state.reading()
        return healing(state, f, *args, **kwargs)

    return pass_state(update_wrapper(read_only, f))


def pass_log_reader(f: Callable[Concatenate[State, P], T]) -> Callable[P, T]:
    """`pass_reader` for a command whose answer is about the log itself (`log verify`, `log export`):
    where there is no log there is no answer as for an empty one: NotFound (Session.require_a_log)."""

    def log_only(state: State, *args: P.args, **kwargs: P.kwargs) -> T:
        if state.scratch is None:
            state.require_a_log()
        state.reading()
        return healing(state, f, *args, **kwargs)

    return pass_state(update_wrapper(log_only, f))


def require_a_log(state: State) -> None:
    """NotFound where there is no log, before anything is created (Session.require_a_log)."""
    state.require_a_log()
