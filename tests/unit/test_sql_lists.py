"""adapters/sql_lists: lists of values go as a few statement shapes, with the same set of values."""

from __future__ import annotations

from rollouts.adapters.sql_lists import MOST, chunks, marks, padded, shape


def test_lists_are_sent_as_powers_of_two_holding_the_same_values() -> None:
    lengths = set()
    for n in range(1, MOST + 1):
        values = [f"v{i}" for i in range(n)]
        sent = padded(values)
        lengths.add(len(sent))
        assert len(sent) == shape(n) >= n and sent[:n] == values and set(sent) == set(values)
    assert lengths == {1 << k for k in range(10)}  # ten shapes for up to MOST values
    assert [len(c) for c in chunks(list(range(1200)))] == [MOST, MOST, 1200 - 2 * MOST]
    assert marks(3) == "?,?,?"
