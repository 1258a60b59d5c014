"""The lease tables a controller creates on first use, by several controllers starting at once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from rollouts.adapters.home import Home
from rollouts.adapters.notify.lease import SinkLeases
from rollouts.adapters.runtime.shim import boot_clock
from rollouts.adapters.service.bootstrap import open_app
from rollouts.adapters.service.leases import Leases

pytestmark = pytest.mark.slow  # a PostgreSQL server, threads racing (see tests/test_tiers.py)


def test_controllers_starting_together_on_a_new_postgres_schema_each_get_their_lease_tables(
    postgres_url: str, tmp_path: Path
) -> None:
    """Two controllers started at once on a new store: CREATE TABLE IF NOT EXISTS races in PostgreSQL
    (a unique violation on pg_type), and the one that lost it died with exit 70."""
    home = Home(tmp_path / "home")
    home.ensure()
    app = open_app(home, postgres_url)
    starters = 6
    ready = threading.Barrier(starters)
    failures: list[BaseException] = []

    def start(n: int) -> None:
        ready.wait()
        try:
            Leases(app)
            SinkLeases(app.recorder, f"controller-{n}", 3.0)
        except BaseException as error:  # noqa: BLE001 - collected, asserted below
            failures.append(error)

    threads = [threading.Thread(target=start, args=(n,)) for n in range(starters)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    app.close()
    assert failures == []


def test_a_lease_table_made_before_lengths_and_holders_gets_them(tmp_path: Path, backend_store) -> None:  # noqa: ANN001
    """A table of two columns (claimant, renewed_at) from before: its rows' lengths are unknown and judged by
    this controller's own, as they were; new leases keep theirs."""
    app = open_app(Home(tmp_path / "home"), backend_store)
    table = app.recorder.beside.table("rollouts_leases")
    with app.recorder.datastore.transaction(commit=True) as cursor:
        cursor.execute(f"CREATE TABLE {table} (claimant TEXT PRIMARY KEY, renewed_at DOUBLE PRECISION)")
        cursor.execute(f"INSERT INTO {table} VALUES ('gone', 0)")
    leases = Leases(app, seconds=5, where="host 1:2")
    assert leases.renew("a" * 32)
    assert leases.expired() == {"gone"}
    longer = Leases(app, seconds=600, where="host 3:4")
    assert longer.renew("b" * 32)
    assert "b" * 32 not in Leases(app, seconds=0.001).expired()  # judged by its holder's 600 s
    app.close()


def test_a_renewal_counts_from_when_it_was_sent_not_from_its_late_answer(
    tmp_path: Path, backend_store: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database stamps a renewal when it arrives; a link that holds the answer back (the nemesis's delay
    fault) must not make the controller think its lease fresher than other hosts see it: its shims were
    kept beating for the delay past the lease's end (7.3 s after the last renewal with a 4 s lease)."""
    import time

    app = open_app(Home(tmp_path / "home"), backend_store)
    leases = Leases(app, seconds=5, where="host 1:2")
    execute = leases.table._execute

    def answer_late(*args: object, **kwargs: object) -> list[object]:
        found = execute(*args, **kwargs)  # type: ignore[arg-type]
        time.sleep(0.5)  # the answer held back on its way
        return found

    monkeypatch.setattr(leases.table, "_execute", answer_late)
    before, before_boot = time.monotonic(), boot_clock()
    assert leases.renew("a" * 32)
    assert leases.renewed - before < 0.25  # the send, not the answer 0.5 s later
    assert 0 <= leases.renewed_boot - before_boot < 0.25  # and so by the boot clock the heartbeat carries
    app.close()
