"""The per-invocation state built by the root group: home, store, actor, and lazy handles."""

from __future__ import annotations

import os
from functools import cached_property
from typing import Any

import click

from adapters.home import Home


class State:
    """What every command needs; the store and projections open only when first used."""

    def __init__(self, home: str, store: str | None, actor: str) -> None:
        self.home = Home(home)
        self.store = store or None
        self.actor = actor
        self.cache_kib: int | None = None  # per projection connection, for a long-lived process
        if self.store:
            from adapters.store_url import parse_store

            parse_store(self.store)  # a bad URL is a usage error before anything opens

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
            warn=lambda text: click.echo(f"warning: {text}", err=True),
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


pass_state = click.make_pass_decorator(State)
