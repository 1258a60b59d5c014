"""The controller's memory stays flat as the files it reads grow: its SQLite page caches are bounded."""

from __future__ import annotations

from typing import Any

import pytest

from rollouts.adapters.controller import start
from rollouts.adapters.controller.loop import SQLITE_CACHE_KIB

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


def test_the_controller_bounds_the_page_cache_of_each_connection_it_keeps(
    rollouts: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    caches: dict[str, int] = {}

    class Probe:
        def __init__(self, app: Any, projections: Any, runtime: Any, *args: Any, **kwargs: Any) -> None:
            for name in ("desired", "history", "audit"):
                caches[name] = projections.db(name).execute("PRAGMA cache_size").fetchone()[0]
            caches["runtime"] = runtime._db.execute("PRAGMA cache_size").fetchone()[0]
            self.runtime = runtime  # closed by the command
            with app.recorder.datastore.get_connection(
                commit=False
            ) as conn:  # the log's (a pool's: every one it makes)
                cursor = conn.cursor()
                cursor.execute("PRAGMA cache_size")
                caches["log"] = cursor.fetchone()[0]

        def run(self, **kwargs: Any) -> int:
            return 0

    monkeypatch.setattr(start, "Controller", Probe)
    result = rollouts.run("controller", "run", "--once")
    assert result.exit_code == 0, result.stderr
    assert caches == dict.fromkeys(("desired", "history", "audit", "runtime", "log"), -SQLITE_CACHE_KIB)
