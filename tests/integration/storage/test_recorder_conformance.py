"""Both chained recorders are still the library's recorders: its own conformance tests, on SQLite and PostgreSQL
(eventsourcing.tests imports its cipher module: pycryptodome, in the test extra)."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import uuid
from typing import ClassVar

import pytest
from conftest import POSTGRES, postgres_reachable
from eventsourcing.tests import persistence

from rollouts.adapters.service.application import RolloutsApp
from rollouts.adapters.service.bootstrap import bootstrap
from rollouts.adapters.store.port import LogRecorder

pytestmark = pytest.mark.slow  # real stores (see tests/test_tiers.py)


class _Conformance(persistence.ApplicationRecorderTestCase):
    """The library's tests of an application recorder, each on a store of its own, opened as bootstrap opens it."""

    __test__ = False  # its subclasses run, one per store

    store: ClassVar[str | None] = None

    def setUp(self) -> None:
        super().setUp()
        self.folder = tempfile.mkdtemp()
        self.schema = f"t_{uuid.uuid4().hex[:12]}"
        self.apps: list[RolloutsApp] = []
        self.threads_before = set(threading.enumerate())

    def tearDown(self) -> None:
        # The library's concurrency case tells its reader threads to stop and does not wait for them: closing
        # the store under a thread still in a select crashed the process (a segfault in sqlite3, 1 run in ~10).
        for thread in set(threading.enumerate()) - self.threads_before:
            thread.join(timeout=30)
        for app in self.apps:
            app.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.store is not None:
            import psycopg

            with psycopg.connect(POSTGRES, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        super().tearDown()

    def create_recorder(self) -> LogRecorder:
        store = None if self.store is None else f"{self.store}?schema={self.schema}"
        app = bootstrap(self.folder, store).open_app()
        self.apps.append(app)
        return app.recorder

    def test_performance(self) -> None:
        pytest.skip("a timing, not a behaviour (bench/ measures the recorders)")

    def test_concurrent_throughput(self) -> None:
        pytest.skip("a timing, not a behaviour (bench/ measures the recorders)")


class TestChainedSQLiteRecorder(_Conformance):
    __test__ = True
    store = None


class TestChainedPostgresRecorder(_Conformance):
    __test__ = True
    store = POSTGRES

    def setUp(self) -> None:
        if (why := postgres_reachable()) is not None:
            if os.environ.get("ROLLOUTS_REQUIRE_POSTGRES") == "1":
                pytest.fail(f"PostgreSQL is required (ROLLOUTS_REQUIRE_POSTGRES=1) but unreachable: {why}")
            pytest.skip(f"PostgreSQL unreachable: {why}")
        super().setUp()
