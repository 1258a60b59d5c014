"""Lists of values in one SQLite statement, in few shapes.

A statement text per list length fills a connection's statement cache (sqlite3 keeps 128 per
connection) with near copies, each a few hundred bytes per value: a controller's log and runtime
connections held ~6 MB of them after 10,000 rollouts. Lengths rounded up to a power of two leave
ten shapes of each statement at most.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")
MOST = 512  # values in one statement at most (a power of two)


def chunks(values: Sequence[T], most: int = MOST) -> Iterator[Sequence[T]]:
    """`values` in slices of at most `most`."""
    for i in range(0, len(values), most):
        yield values[i : i + most]


def shape(count: int) -> int:
    """The length a list of `count` values (1 or more) is sent as: the next power of two."""
    return 1 << (count - 1).bit_length()


def padded(values: Sequence[T]) -> list[T]:
    """`values` (not empty) with its last repeated up to shape(len(values)): as the values of an IN list,
    the same set."""
    return [*values, *([values[-1]] * (shape(len(values)) - len(values)))]


def marks(count: int) -> str:
    """`count` question marks, comma-separated."""
    return ",".join("?" * count)
