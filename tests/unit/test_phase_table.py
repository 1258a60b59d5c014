"""domain/phase_table.py: every deployment's phase, a byte each; and revisions a log should not hold."""

from __future__ import annotations

from rollouts.domain import phases
from rollouts.domain.phase_table import PhaseTable


def test_phases_are_kept_per_config_and_revision() -> None:
    table = PhaseTable()
    table.set("web", 1, phases.COMPLETE)
    table.set("web", 3, phases.RUNNING)
    table.set("api", 1, phases.FAILED)
    assert table.get("web", 1) == phases.COMPLETE and table.get("web", 3) == phases.RUNNING
    assert table.get("web", 2) is None and table.get("api", 1) == phases.FAILED and table.get("db", 1) is None
    table.set("web", 1, phases.NEW)  # a retry: the phase is set again
    assert table.get("web", 1) == phases.NEW and len(table) == 3


def test_a_revision_far_out_or_not_a_number_does_not_grow_an_array() -> None:
    table = PhaseTable()
    for revision in (10**9, -4, "7x"):
        table.set("web", revision, phases.PENDING)  # type: ignore[arg-type]
        assert table.get("web", revision) == phases.PENDING  # type: ignore[arg-type]
    assert sum(len(a) for a in table._arrays.values()) < 10
    assert len(table) == 3


def test_a_revision_kept_far_then_reached_by_the_array_is_still_found() -> None:
    table = PhaseTable()
    table.set("web", 5000, phases.COMPLETE)  # past the array's reach: kept aside
    for revision in range(1, 4500):
        table.set("web", revision, phases.COMPLETE)  # the array grows past 5000
    assert table.get("web", 5000) == phases.COMPLETE
    table.set("web", 5000, phases.FAILED)
    assert table.get("web", 5000) == phases.FAILED
