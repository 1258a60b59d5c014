"""Which log first wrote each position of a log that was moved or renamed (DESIGN 7.3): pure, no store."""

from __future__ import annotations

from collections.abc import Callable

Origins = Callable[[str], "tuple[str | None, int] | None"]  # log id -> (source log id, head) of its Origin


def writer_of(own: str, origin_of: Origins) -> Callable[[int], str]:
    """The id of the log that first wrote each position of log `own`. An imported log, or one renamed when a
    home was rebound onto an older copy, holds positions its origin wrote first (up to the origin's head);
    `origin_of` gives each log's Origin, so the walk goes back through every move, a loop ending it."""
    chain: list[tuple[int, str]] = []  # (head, source) from the newest origin back
    current, seen = own, set()
    while current and current not in seen:
        seen.add(current)
        origin = origin_of(current)
        if origin is None or not origin[0]:
            break
        chain.append((origin[1], origin[0]))
        current = origin[0]

    def writer(position: int) -> str:
        found = own
        for head, source in chain:
            if position > head:
                break
            found = source
        return found

    return writer
