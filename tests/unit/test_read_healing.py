"""A read command whose views break under it heals them and is asked again (adapters.cli.state.healing)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rollouts.adapters.cli import state as cli_state
from tests.broken_files import not_a_database_error


class Views:
    """The projections of a state: `heal_broken` says whether it healed a view (it is counted)."""

    def __init__(self, heals: bool) -> None:
        self.heals = heals
        self.healed = 0

    def heal_broken(self) -> bool:
        self.healed += self.heals
        return self.heals


def command(failures: list[BaseException]) -> Any:
    def read(state: Any) -> str:
        if failures:
            raise failures.pop(0)
        return "answer"

    return read


def test_a_view_broken_again_while_the_first_was_healed_is_healed_too(tmp_path: Path) -> None:
    """Found by chaos --scale: `projections status` healed one view, then met a second broken one
    and failed (exit 5) because it healed only once."""
    views = Views(heals=True)
    state = SimpleNamespace(projections=views, projections_open=True)
    failures: list[BaseException] = [not_a_database_error(tmp_path), not_a_database_error(tmp_path)]
    assert cli_state.healing(state, command(failures)) == "answer"  # type: ignore[arg-type]
    assert views.healed == 2


def test_a_view_that_keeps_breaking_fails_the_command_after_a_bounded_number_of_heals(tmp_path: Path) -> None:
    views = Views(heals=True)
    state = SimpleNamespace(projections=views, projections_open=True)
    failures: list[BaseException] = [not_a_database_error(tmp_path) for _ in range(cli_state.HEALS + 1)]
    with pytest.raises(sqlite3.DatabaseError):
        cli_state.healing(state, command(failures))  # type: ignore[arg-type]
    assert views.healed == cli_state.HEALS


def test_an_error_no_heal_mends_is_raised_at_once(tmp_path: Path) -> None:
    """Nothing found broken (the error is elsewhere), or not a broken file at all (a busy database)."""
    broken, busy = not_a_database_error(tmp_path), sqlite3.OperationalError("locked")
    cases = ((Views(heals=False), broken), (Views(heals=True), busy))
    for views, error in cases:
        state = SimpleNamespace(projections=views, projections_open=True)
        with pytest.raises(sqlite3.DatabaseError):
            cli_state.healing(state, command([error, error]))  # type: ignore[arg-type]
        assert views.healed == 0
