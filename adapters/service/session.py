"""The per-command session every face uses: the home's binding to its log, scratch homes and views for reads,
healing broken views, and the application, recorder and views opened once when first needed."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

from ...domain.errors import NotFound
from ...projections.file_checks import is_broken
from .. import settings
from ..home import Home, HomeReadOnly
from ..identity import new_meta
from ..store import binding
from ..store.binding import HomeBoundElsewhere
from ..store.reader import RecorderSource
from ..store.url import SQLiteInHome, StoreURL, parse_store
from .bootstrap import bootstrap

if TYPE_CHECKING:
    from ...projections.live import Warn
    from ...projections.store import ProjectionStore
    from ..store.port import Backend, LogRecorder
    from .application import RolloutsApp

T = TypeVar("T")
P = ParamSpec("P")
LogMark = tuple[str | None, int, str | None]  # a log's id, head and the head's hash, as the binding records them
HEALS = 3  # times a read heals views broken under it and is asked again


class Session:
    """What every command needs of the home and its store; the store and the views open only when first used."""

    def __init__(self, home: str, store: str | None, actor: str, warn: Warn, store_named: str = "--store") -> None:
        self._warn = warn
        # A bad URL is a usage error before anything opens (naming the option or variable it came from)
        self.services = bootstrap(Home(home, warn=self.warn), parse_store(store, given_as=store_named))
        self.scratch: Path | None = None  # a read command's stand-in for a missing home
        self.actor = actor
        self.cache_kib: int | None = None  # per connection to the views and the SQLite log, for a long-lived process
        self.autocheckpoint = True  # False: the views' commits leave their WAL to the caller (serve's thread)
        self._log: LogMark = (None, 0, None)  # what log_problem last saw of the log
        self._recorded: LogMark | None = None  # what check_log last wrote to the binding
        self._no_log: bool | None = None
        self._app: RolloutsApp | None = None
        self._recorder: LogRecorder | None = None  # a bare recorder, when a read opened no application
        self._projections: ProjectionStore | None = None
        self._problem: str | None = None
        self._checked = False  # whether _problem is known (log_problem)
        self.accept_any_log = False  # `home rebind` alone acts on a log the home is not bound to
        self._scratch_views: tempfile.TemporaryDirectory[str] | None = None  # views of a log the home is not bound to

    @property
    def home(self) -> Home:
        return self.services.home

    @property
    def backend(self) -> Backend:
        return self.services.backend

    def warn(self, text: str) -> None:
        self._warn(text)

    def reading(self) -> None:
        """A read never creates the home: on a missing one it answers from a scratch home, removed on close
        (with the default store, which lives in the home: as for an empty log). An existing directory is
        the home, log or not: a long-running read (serve) sees the first write."""
        if self.scratch is not None:
            return
        store: StoreURL = self.backend.store
        unwritable = None  # a home that exists but cannot be written: read from a copy of it (7.11)
        if self.backend.shared and self.store_has_no_log():  # no DDL for a read: a misspelt schema is not made
            self.warn(f"{self.store_shown()} holds no log yet; answering as for an empty log (nothing is created)")
            store = SQLiteInHome()
        elif self.home.path.exists() and self.home.writable():
            return
        elif self.home.path.exists():
            self.warn(
                f"home {self.home.path} cannot be written; answering from a copy of it (nothing is written there)"
            )
            unwritable = self.home
        else:
            what = "from the store with views built aside" if self.backend.shared else "as for an empty log"
            self.warn(f"home {self.home.path} does not exist; answering {what} (nothing is written)")
        self.scratch = Path(tempfile.mkdtemp(prefix="rollouts-read-"))
        self.services = bootstrap(Home(self.scratch / "home"), store)
        if unwritable is not None:
            unwritable.copy_for_reading(self.home)

    def store_has_no_log(self) -> bool:
        """Whether the store holds no log (asked once: reading() and require_a_log both want it)."""
        if self._no_log is None:
            self._no_log = not self.backend.has_log()
        return self._no_log

    def store_has_log(self) -> bool:
        """Whether the store holds a log already: opening the application on one that does not makes it."""
        return not self.store_has_no_log()

    def require_a_log(self) -> None:
        """NotFound where there is no log (a missing home or one without events.db with the default store, a
        PostgreSQL store with none), before anything is created: a read about the log itself (`log verify`)
        has no answer as for an empty one (a verified "ok" of a mistyped home would pass for a real one)."""
        if self.store_has_no_log():
            if self.backend.shared:
                raise NotFound(f"{self.store_shown()} holds no log: there is no log to read (give --home or --store)")
            where = "holds no event log (events.db)" if self.home.path.exists() else "does not exist"
            raise NotFound(f"home {self.home.path} {where}: there is no log to read (give --home or --store)")

    def refuse_making_a_log(self) -> None:
        """A home bound to a log refuses a store that holds none before it is opened: opening it would make
        a schema, tables and a log id there, for a command that is then refused (a mistyped --store)."""

        if self.accept_any_log:
            return
        bound = binding.load(self.home.runtime)  # first: a home bound to nothing asks the server nothing more
        if bound is not None and not self.store_has_log():
            raise binding.HomeBoundElsewhere(
                f"home {self.home.path} belongs to log {bound.log_id} (seen up to position {bound.seen}), but"
                f" {self.store_shown()} holds no log; point --store/--home at the right pair, or run"
                " 'rollouts home rebind' to bind this home to a new log there"
            )

    def store_shown(self) -> str:
        return self.backend.shown()

    @property
    def app(self) -> RolloutsApp:
        """The application, for commands that write or reconcile: refused on a log this home is not bound to."""
        if self._app is None:
            if self.home.path.exists() and not self.home.writable():  # (a read answers from a copy: reading())
                raise HomeReadOnly(f"home {self.home.path} cannot be written (read-only): only reads work there")
            self.home.ensure()  # first: a home that cannot be one (a file, another account's) is one error line
            self.refuse_making_a_log()
            # (a long-lived process bounds the log connections' page caches as the views')
            app = self.services.open_app(
                **({} if self.cache_kib is None else {"SQLITE_CACHE_KIB": str(self.cache_kib)})
            )
            problem = None if self.accept_any_log else self.log_problem(app.recorder)
            if problem is not None:
                app.close()
                raise HomeBoundElsewhere(problem)
            self._app = app
        return self._app

    @property
    def opened_app(self) -> RolloutsApp | None:
        """The application, if this command opened it already."""
        return self._app

    @property
    def recorder(self) -> LogRecorder:
        """The log's recorder: the application's when it is open, else a bare one (reads stay light)."""
        if self._recorder is not None:
            return self._recorder
        if self._app is not None:
            return self._app.recorder
        self._recorder = self.services.open_recorder()
        return self._recorder

    @property
    def projections(self) -> ProjectionStore:
        """The views; on a log this home is not bound to, scratch views built for this command alone."""
        if self._projections is None:
            self._projections = self._open_projections()
        return self._projections

    @property
    def projections_open(self) -> bool:
        return self._projections is not None

    def _open_projections(self) -> ProjectionStore:
        from ...projections.store import ProjectionStore  # start-up cost: commands that only append

        folder = self.home.projections
        problem = self.log_problem(self.recorder)
        if problem is not None:
            self.warn(f"{problem}; answering from scratch views")
            self._scratch_views = tempfile.TemporaryDirectory(prefix="rollouts-views-")
            folder = Path(self._scratch_views.name)
        return ProjectionStore(
            folder,
            RecorderSource(self.recorder),
            frozen=settings.freeze_projections(),
            warn=self.warn,
            cache_kib=self.cache_kib,
            autocheckpoint=self.autocheckpoint,
        )

    def read(self, *names: str) -> ProjectionStore:
        """The projection store, caught up to the head for `names` (read-your-writes)."""

        self.projections.catch_up_named(names)
        return self.projections

    def meta(self, **extra: object) -> dict[str, Any]:
        return new_meta(self.actor, self.app.recorder.session_user(), **extra)

    def log_problem(self, recorder: LogRecorder) -> str | None:
        """Why this home must not act on the store's log (another log, one that went back, or one whose
        history to the position seen changed: binding.Binding.problem), if it must not."""

        if self.accept_any_log:
            return None
        if not self._checked:
            bound = binding.load(self.home.runtime)
            head = recorder.max_notification_id() or 0
            hashes: dict[int, str | None] = {}  # the binding's position is most often the head: one query

            def hash_at(position: int) -> str | None:
                if position not in hashes:
                    hashes[position] = recorder.hash_at(position)
                return hashes[position]

            self._log = (recorder.log_id(), head, hash_at(head) if head else None)
            self._problem = None if bound is None else bound.problem(*self._log[:2], self.home.path, hash_at)
            self._checked = True
        return self._problem

    def bound_views(self) -> ProjectionStore | None:
        """The home's views caught up to the head; None where there are none of this log's (a missing home,
        or one bound to another log or to a history the log no longer holds)."""
        if self.scratch is not None or self.log_problem(self.recorder) is not None:
            return None
        return self.read()

    def require_bound(self) -> None:
        """Refuse (exit 5) unless this home is bound to the store's log as it is."""

        if self._app is None and self._recorder is None:
            self.home.ensure()
            self.refuse_making_a_log()
        problem = self.log_problem(self.recorder)
        if problem is not None:
            raise HomeBoundElsewhere(problem)

    def log_problem_now(self) -> str | None:
        """`log_problem` asked again of the store (a long-lived reader: serve, on every request)."""
        self._checked = False
        return self.log_problem(self.recorder)

    def check_log(self, recorder: LogRecorder) -> None:
        """For a long-lived command (the controller): check the binding again, and remember the head."""

        self._checked = False
        problem = self.log_problem(recorder)
        if problem is not None:
            raise binding.HomeBoundElsewhere(problem)
        if self._log != self._recorded:  # a pass that saw nothing new writes nothing
            binding.record(self.home.runtime, *self._log)
            self._recorded = self._log

    def check_pass(self) -> None:
        """Before each controller pass: the home's binding holds, and the log is not sealed (it moved: the
        controller exits 1)."""
        from .moves import check_unsealed  # start-up cost: its aggregates load only for the controller

        recorder = self.app.recorder
        self.check_log(recorder)
        check_unsealed(recorder)

    def _remember_head(self) -> None:
        """A command that used the log on a home bound to it raises the position the home has seen."""

        if not self._checked or self._problem is not None or not self.home.runtime.is_dir():
            return
        recorder = self._app.recorder if self._app is not None else self._recorder
        if recorder is not None:
            head = recorder.max_notification_id() or 0
            binding.record(self.home.runtime, recorder.log_id(), head, recorder.hash_at(head) if head else None)

    def close(self) -> None:
        with contextlib.suppress(Exception):  # noqa: BLE001 - remembering is best effort; the next check decides
            self._remember_head()
        if self._projections is not None:
            self._projections.close()
        if self._scratch_views is not None:
            self._scratch_views.cleanup()
        if self._app is not None:
            self._app.close()
        if self._recorder is not None:
            self._recorder.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


class Heals(Protocol):
    def heal_broken(self) -> bool: ...


class Healable(Protocol):
    """What `healing` needs of a session: its views, and whether they are open."""

    @property
    def projections_open(self) -> bool: ...

    @property
    def projections(self) -> Heals: ...


S = TypeVar("S", bound=Healable)


def healing(session: S, f: Callable[Concatenate[S, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`f(session, ...)`; a view found broken by its queries is rebuilt and `f` asked again, as long as
    each try healed a view, HEALS times at most (bytes may land over another file meanwhile: chaos
    --scale saw a second view break while the first was rebuilt)."""
    for _ in range(HEALS):
        try:
            return f(session, *args, **kwargs)
        except sqlite3.DatabaseError as error:
            # A view broken where its checks at open could not see (a page deep in the file).
            if not is_broken(error) or not session.projections_open or not session.projections.heal_broken():
                raise
    return f(session, *args, **kwargs)
