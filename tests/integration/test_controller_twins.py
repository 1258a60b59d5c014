"""Twin controllers of one home count each other through lock files, which end with their process."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters.controller import twins
from adapters.controller.twins import Twins

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def recount_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(twins, "RECOUNT_S", 0.0)


def test_each_twin_gets_its_own_rank_and_all_see_how_many_run(tmp_path: Path) -> None:
    first, second = Twins(tmp_path / "c"), Twins(tmp_path / "c")
    try:
        assert (first.share(), second.share()) == ((0, 2), (1, 2))
        first.close()
        assert second.share() == (0, 1)
        third = Twins(tmp_path / "c")  # takes the slot that was freed
        assert (second.share(), third.share()) == ((1, 2), (0, 2))
        third.close()
    finally:
        first.close()
        second.close()


def test_a_twin_that_died_stops_counting(tmp_path: Path) -> None:
    code = "import sys, time\nfrom pathlib import Path\nfrom adapters.controller.twins import Twins\n"
    code += "t = Twins(Path(sys.argv[1]))\nprint(t.slot, flush=True)\ntime.sleep(60)\n"
    other = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "c")], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "0"
        me = Twins(tmp_path / "c")
        assert me.share() == (1, 2)
        other.kill()
        other.wait()
        deadline = time.monotonic() + 5
        while me.share() != (0, 1):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        me.close()
    finally:
        other.kill()
        other.wait()


def test_lock_files_are_private(tmp_path: Path) -> None:
    twin = Twins(tmp_path / "c")
    try:
        assert (tmp_path / "c").stat().st_mode & 0o777 == 0o700
        assert all(path.stat().st_mode & 0o777 == 0o600 for path in (tmp_path / "c").iterdir())
    finally:
        twin.close()
