"""The per-invocation state built by the root group: home, store, actor, and lazy handles."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable
from functools import cached_property, update_wrapper
from pathlib import Path
from typing import Any

import click

from adapters.home import Home


class State:
    """What every command needs; the store and projections open only when first used."""

    def __init__(self, home: str, store: str | None, actor: str) -> None:
        self.home = Home(home, warn=self.warn)
        self.scratch: Path | None = None  # a read command's stand-in for a missing home
        self.store = store or None
        self.actor = actor
        self.cache_kib: int | None = None  # per projection connection, for a long-lived process
        if self.store:
            from adapters.store_url import parse_store

            parse_store(self.store)  # a bad URL is a usage error before anything opens

    def warn(self, text: str) -> None:
        click.echo(f"warning: {text}", err=True)

    def reading(self) -> None:
        """A read command never creates the home: on a missing one it answers from a scratch home,
        removed on close (with the default store, which lives in the home: as for an empty log)."""
        if self.scratch is not None or self.home.path.exists():
            return
        import tempfile

        self.scratch = Path(tempfile.mkdtemp(prefix="rollouts-read-"))
        what = "from the store with views built aside" if self.store else "as for an empty log"
        self.warn(f"home {self.home.path} does not exist; answering {what} (nothing is written)")
        self.home = Home(self.scratch / "home")

    @cached_property
    def app(self) -> Any:
        from adapters.eventstore import open_app

        self.home.ensure()
        return open_app(self.home, self.store)

    @cached_property
    def recorder(self) -> Any:
        """The log's recorder: the application's when it is open, else a bare one (reads stay light)."""
        if "app" in self.__dict__:
            return self.app.recorder
        from adapters.eventstore import open_recorder

        self.home.ensure()
        return open_recorder(self.home, self.store)

    @cached_property
    def projections(self) -> Any:
        from adapters.log_source import RecorderSource
        from projections.store import ProjectionStore

        return ProjectionStore(
            self.home.projections,
            RecorderSource(self.recorder),
            frozen=os.environ.get("ROLLOUTS_FREEZE_PROJECTIONS") == "1",
            warn=self.warn,
            cache_kib=self.cache_kib,
        )

    def read(self, *names: str) -> Any:
        """The projection store, caught up to the head for `names` (read-your-writes)."""
        from projections.store import projections_named

        self.projections.catch_up(projections_named(names))
        return self.projections

    def meta(self, **extra: Any) -> dict[str, Any]:
        from adapters.application import new_meta

        return new_meta(self.actor, **extra)

    def close(self) -> None:
        if "projections" in self.__dict__:
            self.projections.close()
        if "app" in self.__dict__:
            self.app.close()
        elif "recorder" in self.__dict__:
            self.recorder.datastore.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


pass_state = click.make_pass_decorator(State)


def pass_reader(f: Callable[..., Any]) -> Callable[..., Any]:
    """`pass_state` for a read command: on a missing home it reads without creating one; a view
    found broken by its queries is rebuilt and the command asked again."""

    def read_only(state: State, *args: Any, **kwargs: Any) -> Any:
        state.reading()
        try:
            return f(state, *args, **kwargs)
        except sqlite3.DatabaseError as error:
            # A view broken where its checks at open could not see (a page deep in the file): once.
            from projections.health import is_broken

            if not is_broken(error) or "projections" not in state.__dict__ or not state.projections.heal_broken():
                raise
            return f(state, *args, **kwargs)

    return pass_state(update_wrapper(read_only, f))
