"""The per-invocation state built by the root group: home, store, actor, and lazy handles."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from functools import cached_property, update_wrapper
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from adapters.home import Home

if TYPE_CHECKING:
    from adapters.application import RolloutsApp


class State:
    """What every command needs; the store and projections open only when first used."""

    def __init__(self, home: str, store: str | None, actor: str) -> None:
        self.home = Home(home, warn=self.warn)
        self.scratch: Path | None = None  # a read command's stand-in for a missing home
        self.store = store or None
        self.actor = actor
        self.cache_kib: int | None = None  # per projection connection, for a long-lived process
        self._recorded: tuple[str | None, int, str | None] | None = None  # what check_log last wrote to the binding
        self.accept_any_log = False  # `home rebind` alone acts on a log the home is not bound to
        self._scratch_views: tempfile.TemporaryDirectory[str] | None = None  # views of a log the home is not bound to
        if self.store:
            from adapters.store_url import parse_store

            parse_store(self.store)  # a bad URL is a usage error before anything opens

    def warn(self, text: str) -> None:
        click.echo(f"warning: {text}", err=True)

    def reading(self) -> None:
        """A read command never creates the home: on a missing one it answers from a scratch home,
        removed on close (with the default store, which lives in the home: as for an empty log). An
        existing directory is the home, log or not: a long-running read (serve) sees the first write."""
        if self.scratch is not None:
            return
        if self.store and self.store_has_no_log():  # no DDL for a read: a misspelt schema is not made
            self.warn(f"{self.store_shown()} holds no log yet; answering as for an empty log (nothing is created)")
            self.store = None
        elif self.home.path.exists():
            return
        else:
            what = "from the store with views built aside" if self.store else "as for an empty log"
            self.warn(f"home {self.home.path} does not exist; answering {what} (nothing is written)")
        self.scratch = Path(tempfile.mkdtemp(prefix="rollouts-read-"))
        self.home = Home(self.scratch / "home")

    def store_has_no_log(self) -> bool:
        """Whether the PostgreSQL store holds no log (asked of the server once: reading() and
        pass_log_reader both want it)."""
        if "_no_log" not in self.__dict__:
            from adapters.eventstore import store_has_no_log

            self._no_log = self.store is not None and store_has_no_log(self.store)
        return self._no_log

    def store_shown(self) -> str:
        from adapters.store_url import parse_store

        return parse_store(self.store).redacted() if self.store else str(self.home.events_db)

    @cached_property
    def app(self) -> RolloutsApp:
        """The application, for commands that write or reconcile: refused on a log this home is not bound to."""
        from adapters.binding import HomeBoundElsewhere
        from adapters.eventstore import open_app

        self.home.ensure()
        app = open_app(self.home, self.store)
        problem = None if self.accept_any_log else self.log_problem(app.recorder)
        if problem is not None:
            app.close()
            raise HomeBoundElsewhere(problem)
        return app

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
        """The views; on a log this home is not bound to, scratch views built for this command alone."""
        from adapters.log_source import RecorderSource
        from projections.store import ProjectionStore

        folder = self.home.projections
        problem = self.log_problem(self.recorder)
        if problem is not None:
            click.echo(f"warning: {problem}; answering from scratch views", err=True)
            self._scratch_views = tempfile.TemporaryDirectory(prefix="rollouts-views-")
            folder = Path(self._scratch_views.name)
        return ProjectionStore(
            folder,
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

    def log_problem(self, recorder: Any) -> str | None:
        """Why this home must not act on the store's log (another log, one that went back, or one whose
        history to the position seen changed: binding.Binding.problem), if it must not."""
        from adapters import binding

        if self.accept_any_log:
            return None
        if "_problem" not in self.__dict__:
            bound = binding.load(self.home.runtime)
            head = recorder.max_notification_id() or 0
            hashes: dict[int, str | None] = {}  # the binding's position is most often the head: one query

            def hash_at(position: int) -> str | None:
                if position not in hashes:
                    hashes[position] = recorder.hash_at(position)
                return hashes[position]

            self._log = (recorder.log_id(), head, hash_at(head) if head else None)
            self._problem = None if bound is None else bound.problem(*self._log[:2], self.home.path, hash_at)
        return self._problem

    def require_bound(self) -> None:
        """Refuse (exit 5) unless this home is bound to the store's log as it is."""
        from adapters.binding import HomeBoundElsewhere

        problem = self.log_problem(self.app.recorder if "app" in self.__dict__ else self.recorder)
        if problem is not None:
            raise HomeBoundElsewhere(problem)

    def check_log(self, recorder: Any) -> None:
        """For a long-lived command (the controller): check the binding again, and remember the head."""
        from adapters import binding

        self.__dict__.pop("_problem", None)
        problem = self.log_problem(recorder)
        if problem is not None:
            raise binding.HomeBoundElsewhere(problem)
        if self._log != self._recorded:  # a pass that saw nothing new writes nothing
            binding.record(self.home.runtime, *self._log)
            self._recorded = self._log

    def _remember_head(self) -> None:
        """A command that used the log on a home bound to it raises the position the home has seen."""
        from adapters import binding

        if self.__dict__.get("_problem", True) is not None or not self.home.runtime.is_dir():
            return
        recorder = self.app.recorder if "app" in self.__dict__ else self.__dict__.get("recorder")
        if recorder is not None:
            head = recorder.max_notification_id() or 0
            binding.record(self.home.runtime, recorder.log_id(), head, recorder.hash_at(head) if head else None)

    def close(self) -> None:
        with contextlib.suppress(Exception):  # noqa: BLE001 - remembering is best effort; the next check decides
            self._remember_head()
        if "projections" in self.__dict__:
            self.projections.close()
        if self._scratch_views is not None:
            self._scratch_views.cleanup()
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
        return healing(state, f, *args, **kwargs)

    return pass_state(update_wrapper(read_only, f))


def pass_log_reader(f: Callable[..., Any]) -> Callable[..., Any]:
    """`pass_reader` for a command whose answer is about the log itself (`log verify`, `log export`):
    where there is no log (a missing home or one without events.db with the default store, a PostgreSQL
    store with none) there is no answer as for an empty one (a verified "ok" or an empty export of a
    mistyped home would pass for a real one): NotFound."""

    def log_only(state: State, *args: Any, **kwargs: Any) -> Any:
        from domain.errors import NotFound

        if state.scratch is None and state.store_has_no_log():
            raise NotFound(f"{state.store_shown()} holds no log: there is no log to read (give --home or --store)")
        if not state.store and state.scratch is None and not state.home.events_db.exists():
            where = "holds no event log (events.db)" if state.home.path.exists() else "does not exist"
            raise NotFound(f"home {state.home.path} {where}: there is no log to read (give --home or --store)")
        state.reading()
        return healing(state, f, *args, **kwargs)

    return pass_state(update_wrapper(log_only, f))


HEALS = 3  # times a read command heals views broken under it and is asked again


def healing(state: State, f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`f(state, ...)`; a view found broken by its queries is rebuilt and `f` asked again, as long as
    each try healed a view, HEALS times at most (bytes may land over another file meanwhile: chaos
    --scale saw a second view break while the first was rebuilt)."""
    for _ in range(HEALS):
        try:
            return f(state, *args, **kwargs)
        except sqlite3.DatabaseError as error:
            # A view broken where its checks at open could not see (a page deep in the file).
            from projections.health import is_broken

            if not is_broken(error) or "projections" not in state.__dict__ or not state.projections.heal_broken():
                raise
    return f(state, *args, **kwargs)
