"""Local runtime: each deployer is an OS process group behind a detached shim, state in SQLite."""

from __future__ import annotations

import builtins
import json
import os
import pathlib
import re
import sqlite3
import subprocess
import threading
import warnings
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager

from ..home import Home, private_dir, private_file
from ..sql_lists import chunks, marks, padded
from . import procs, shim, table
from .forkserver import Forked, ForkServer, ForkServerFailed
from .interpreter import module_argv
from .port import UNKNOWN_CLAIM, DeployerExists, NoSuchDeployer, Observed
from .shim import begin_immediate, connect, utc_now, writing
from .stopping import ACTIVE, Stopping

# The port's names, importable from here too.
__all__ = ["UNKNOWN_CLAIM", "DeployerExists", "LocalRuntime", "NoSuchDeployer", "Observed"]

SHIM = "rollouts.adapters.runtime.shim"  # run as a module: `python -m rollouts.adapters.runtime.shim RUNTIME_DB NAME`
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND


def shim_argv(db_path: pathlib.Path | str, name: str) -> list[str]:
    """The argv of a shim started as an interpreter of its own (without the fork server)."""
    return module_argv(SHIM, str(db_path), name)


class LocalRuntime(Stopping):
    """Deployers as real processes (the runtime port); `home/runtime/runtime.db` is the truth about them."""

    def __init__(
        self, home: Home | pathlib.Path, heartbeat_max_age: float | None = None, cache_kib: int | None = None
    ) -> None:
        """With `heartbeat_max_age`, shims kill their deployer once runtime/heartbeat is older. With
        `cache_kib`, the connection caches at most that many KiB of pages (a long-lived controller)."""
        self._cache_kib = cache_kib
        self._heartbeat = heartbeat_max_age
        self._home = home if isinstance(home, Home) else Home(home)
        self._dir = self._home.runtime
        self._logs = self._dir / "logs"
        self._db_path = self._home.runtime_db
        self._lock = threading.RLock()
        self._shims: dict[int, subprocess.Popen[bytes]] = {}  # ours to reap
        self._batch: list[str] | None = None  # names inserted by the open batched() transaction
        beat = None if heartbeat_max_age is None else (str(self.heartbeat_path), heartbeat_max_age)
        self._fork_server = ForkServer(str(self._db_path), beat, self._forked)  # started by the first spawn
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        with self._home.init_lock():
            private_dir(self._logs)
            private_file(self._db_path)
            db = connect(str(self._db_path), check_same_thread=False)
            if self._cache_kib is not None:
                db.execute(f"PRAGMA cache_size = -{int(self._cache_kib)}")
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode = WAL")
            fresh = db.execute(table.HAS_DEPLOYERS).fetchone() is None
            for statement in table.SCHEMA:
                db.execute(statement)
            if fresh:  # claims made before now were made with a runtime this one does not know (see born)
                db.execute(table.RECORD_BORN, (utc_now(),))
            found = os.stat(self._db_path)
            self._identity = (found.st_dev, found.st_ino)
            columns = {row["name"] for row in db.execute("PRAGMA table_info(deployers)")}
            for column, kind in table.ADDED_COLUMNS.items():
                if column not in columns:
                    db.execute(f"ALTER TABLE deployers ADD COLUMN {column} {kind}")
            if "pass_env" not in columns:
                table.forget_environments(db)
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE: read-then-write never meets 'database is locked' midway."""
        with self._lock, writing(self._db) as db:
            yield db

    def _execute(self, sql: str, params: tuple[object, ...] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, params)

    def _select(self, where: str = "", params: tuple[object, ...] = ()) -> list[Observed]:
        rows = self._execute(table.OBSERVED + where + table.ORDER, params).fetchall()
        return [table.observed(row) for row in rows]

    def _row(self, name: str) -> sqlite3.Row | None:
        sql = "SELECT * FROM deployers WHERE name = ?"
        return self._execute(sql, (name,)).fetchone()

    @property
    def folder(self) -> pathlib.Path:
        """home/runtime: the runtime's table, its logs, and what else belongs to this host's controllers."""
        return self._dir

    @property
    def database(self) -> pathlib.Path:
        return self._db_path

    @property
    def heartbeat_path(self) -> pathlib.Path:
        return self._dir / "heartbeat"

    def data_version(self) -> int:
        """A number that changes whenever another connection (a shim, a twin controller) commits."""
        return int(self._execute("PRAGMA data_version").fetchone()[0])

    def beat(self, at: float | None = None) -> None:
        """The controller proves it is alive to its shims (only a renewed lease may beat), as of `at`."""
        shim.beat(str(self.heartbeat_path), at)

    def log_path(self, name: str) -> pathlib.Path:
        if not _NAME.fullmatch(name):
            raise ValueError(f"invalid deployer name: {name!r}")
        return self._logs / f"{name}.log"

    def create(
        self,
        name: str,
        *,
        config: str,
        revision: int,
        attempt: int,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        pass_env: Sequence[str] = (),
        claim: str | None = None,
    ) -> None:
        """Insert the row (committed before anything runs), then start the shim.

        `env` is stored in the row; of `pass_env` only the names are: the shim takes their values
        from its own environment (this process's) when it spawns the deployer, and `env` wins.

        Inside batched(), the row joins the batch's transaction and the shim starts once it is
        committed.
        """
        if not argv:
            raise ValueError("a deployer needs a command")
        me = os.getpid()
        row = {
            "name": name,
            "config": config,
            "revision": revision,
            "attempt": attempt,
            "argv": json.dumps(argv),
            "env": json.dumps(env),
            "pass_env": json.dumps(sorted(pass_env)),
            "cwd": cwd,
            "creator_pid": me,
            "creator_start": procs.start_time_of(me),
            "log_path": str(self.log_path(name)),
            "created_at": utc_now(),
            "claim": claim,
        }
        with self._lock:
            if self._batch is not None:
                self._insert(self._db, row)
                self._batch.append(name)
                return
            with writing(self._db) as db:
                self._insert(db, row)
        self._spawn(name)

    @staticmethod
    def _insert(db: sqlite3.Connection, row: dict[str, object]) -> None:
        try:
            db.execute(table.INSERT, row)
        except sqlite3.IntegrityError:  # only this statement fails: a batch's transaction goes on
            raise DeployerExists(str(row["name"])) from None

    @contextmanager
    def batched(self) -> Iterator[None]:
        """The creates made inside it insert their rows in one transaction, one sync to disk for all;
        their shims start once it is committed. An error inside rolls every row back."""
        with self._lock:
            if self._batch is not None:  # nested: the outer batch commits
                yield
                return
            self._batch = []
            begin_immediate(self._db)
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                self._batch = None
                raise
            self._db.execute("COMMIT")
            names, self._batch = self._batch, None
        for name in names:
            self._spawn(name)

    def _spawn(self, name: str) -> None:
        """Start the detached shim: forked by the fork server, else as an interpreter of its own.

        The fork server's answer is not waited for: its reader thread hands it to _forked.
        """
        self._reap()
        log = self.log_path(name)
        os.close(os.open(log, _LOG_FLAGS, 0o600))  # there, private, when create() returns
        try:
            self._fork_server.request(name, str(log))
        except ForkServerFailed:
            self._start_shim(name)

    def start_fork_server(self) -> bool:
        """Start the shims' fork server ahead of the first create (a controller's warm-up)."""
        return self._fork_server.start()

    def _forked(self, forked: Forked) -> None:
        """The fork server's answer (on its reader thread): name the shim on its row, or start one."""
        if forked.pid is None:
            # Forked or not, unknown if the server died: a second shim for the row runs nothing (exclusive claim).
            self._start_shim(forked.name)
        else:
            self._record_shim(forked.name, forked.pid, forked.start)

    def _start_shim(self, name: str) -> None:
        spawned = self._popen_shim(name)
        if spawned is not None:
            self._record_shim(name, *spawned)

    def _record_shim(self, name: str, pid: int, start: int | None) -> None:
        """Name the shim on its row, without waiting for the disk (synchronous NORMAL, WAL).

        A process crash loses no commit in WAL mode; a power loss may lose this one, and
        ends the shim with it: the row then has no shim, its creator is dead, and it is lost.
        """
        with self._lock:
            synchronous = self._db.execute("PRAGMA synchronous").fetchone()[0]
            self._db.execute("PRAGMA synchronous = NORMAL")
            try:
                with writing(self._db) as db:
                    db.execute(table.SHIM_SPAWNED, (pid, start, name))
            finally:
                self._db.execute(f"PRAGMA synchronous = {int(synchronous)}")

    def _popen_shim(self, name: str) -> tuple[int, int | None] | None:
        # Popen, not os.posix_spawn: glibc's posix_spawn leaves its internal signals
        # (32, 33) ignored in the child, and nothing can reset them after that.
        argv = shim_argv(self._db_path, name)
        if self._heartbeat is not None:
            argv += [str(self.heartbeat_path), str(self._heartbeat)]
        log = os.open(self.log_path(name), _LOG_FLAGS, 0o600)
        try:
            shim_proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                env=shim.spawner_environment(),
            )
        except OSError as exc:
            # Lost only if no shim (a fork server's, whose answer was lost) has claimed the row.
            self._execute(table.LOST + " AND shim_pid IS NULL", (f"shim failed to start: {exc}", utc_now(), name))
            return None
        finally:
            os.close(log)
        with self._lock:
            self._shims[shim_proc.pid] = shim_proc
        return shim_proc.pid, procs.start_time_of(shim_proc.pid)

    def _reap(self) -> None:
        """Collect shims this process started that have ended (they are our children)."""
        with self._lock:
            for pid, shim_proc in list(self._shims.items()):
                if shim_proc.poll() is not None:
                    del self._shims[pid]

    def tombstone(self, name: str, *, config: str, revision: int, attempt: int, reason: str) -> bool:
        """Insert-if-absent a 'stopped' row with no process: a racing create now fails."""
        self.log_path(name)  # validates the name
        now = utc_now()
        row = (name, config, revision, attempt, reason, now, now)
        with self._tx() as db:
            return db.execute(table.TOMBSTONE, row).rowcount == 1

    def disown_unclaimed(self) -> int:
        """Rows made before claims were recorded can no longer be matched to one (after a rebind): never adopt them."""
        with self._tx() as db:
            return db.execute("UPDATE deployers SET claim = ? WHERE claim IS NULL", (UNKNOWN_CLAIM,)).rowcount

    def list(self, *, include_pruned: bool = False, configs: Collection[str] | None = None) -> list[Observed]:
        where = " WHERE pruned = 0" if not include_pruned else ""
        if configs is None:
            return self._select(where, ())
        # A pass's ended configs: their rows only, not the whole table made into rows.
        found = []
        for chunk in chunks(sorted(set(configs))):
            names = padded(chunk)
            found += self._select(f"{where or ' WHERE 1'} AND config IN ({marks(len(names))})", tuple(names))
        return found

    def active(self) -> builtins.list[Observed]:
        """Rows in state created or running (served by the index on state)."""
        return self._select(table.WHERE_ACTIVE)

    def get(self, name: str) -> Observed | None:
        found = self._select(" WHERE name = ?", (name,))
        return found[0] if found else None

    def born(self) -> str | None:
        row = self._execute(table.BORN).fetchone()
        return None if row is None else str(row[0])

    def _reopen_if_replaced(self) -> None:
        """runtime.db deleted or replaced under a long-lived controller: use the file that is there now
        (its shims write to that one), not the one this connection still holds open."""
        try:
            found = os.stat(self._db_path)
            same = (found.st_dev, found.st_ino) == self._identity
        except FileNotFoundError:
            same = False
        if not same:
            with self._lock:
                self._db.close()
                self._db = self._open()

    def observe(self) -> builtins.list[Observed]:
        """Mark lost what lost its shim; active rows plus those that ended during the call."""
        self._reopen_if_replaced()
        self._reap()
        before = self._execute(table.ACTIVE_ROWS).fetchall()  # one read for all: a pass looks at every one
        for row in before:
            self._refresh(row)
        for row in self._execute(table.STOPPING).fetchall():
            self._finish_stop(row)
        after = self.active()
        still = {o.name for o in after}
        ended = [row["name"] for row in before if row["name"] not in still]
        return after + [o for chunk in chunks(ended) for o in self._named(chunk)]

    def _named(self, names: Sequence[str]) -> builtins.list[Observed]:
        if not names:
            return []
        sent = padded(names)
        return self._select(f" WHERE name IN ({marks(len(sent))})", tuple(sent))

    def _refresh(self, row: sqlite3.Row) -> None:
        """Mark lost the active row (as read by this observe) whose shim, or creator before any shim, is dead."""
        name = row["name"]
        if row["shim_pid"] is None:
            if not procs.is_alive(row["creator_pid"], row["creator_start"]):
                sql = table.LOST + " AND shim_pid IS NULL"
                self._execute(sql, ("creator died before starting the shim", utc_now(), name))
            return
        if procs.is_alive(row["shim_pid"], row["shim_start"]):
            return
        again = self._row(name)  # read again: the dead shim may have written its last word
        if again is None or again["state"] not in ACTIVE:
            return
        if self._kill_remains(again):
            self._execute(table.LOST, ("shim vanished", utc_now(), name))

    def prune(self, names: builtins.list[str]) -> None:
        """History limit: logs deleted, rows kept as tombstones marked pruned (ended rows only)."""
        for name in names:
            if self._execute(table.PRUNE, (name,)).rowcount == 1:
                self.log_path(name).unlink(missing_ok=True)

    def close(self) -> None:
        """Close the table; running shims are detached on purpose and keep going."""
        self._fork_server.close()
        self._reap()
        with warnings.catch_warnings():
            # subprocess reaps a dropped, still running child itself (its _active list).
            warnings.simplefilter("ignore", ResourceWarning)
            self._shims.clear()
        with self._lock:
            self._db.close()
