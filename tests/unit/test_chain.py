"""The hash chain's rules, without a store: what is hashed, and what a walk reports."""

from __future__ import annotations

import uuid

from rollouts.adapters.store import chain

STREAM = uuid.uuid4()
FMT = chain.POSITIONED  # every log made now


def records(n: int) -> list[tuple[int, uuid.UUID, int, str, bytes]]:
    """Positions 1..n with their events."""
    return [(i, STREAM, i, "domain.deployment:Deployment.Created", f'{{"n":{i}}}'.encode()) for i in range(1, n + 1)]


def rows(recs: list[tuple[int, uuid.UUID, int, str, bytes]], hashed_from: int = 0, fmt: int = FMT) -> list[tuple]:
    """The records with hashes stored from position `hashed_from + 1` on (the ones before are unchained)."""
    legacy = chain.fold(chain.ZERO, recs[:hashed_from], fmt)
    hashes = [None] * hashed_from + list(chain.hashes_after(legacy, recs[hashed_from:], fmt))
    return [(*r, h) for r, h in zip(recs, hashes, strict=True)]


def test_a_hash_covers_every_stored_field_and_the_one_before() -> None:
    base = chain.link(chain.ZERO, STREAM, 1, "t", b"x")
    assert base == chain.link(chain.ZERO, str(STREAM), 1, "t", b"x")  # dashed or not, one stream id
    changed = [
        chain.link("1" * 64, STREAM, 1, "t", b"x"),
        chain.link(chain.ZERO, uuid.uuid4(), 1, "t", b"x"),
        chain.link(chain.ZERO, STREAM, 2, "t", b"x"),
        chain.link(chain.ZERO, STREAM, 1, "u", b"x"),
        chain.link(chain.ZERO, STREAM, 1, "t", b"y"),
    ]
    assert base not in changed and len(set(changed)) == len(changed)


def test_a_hash_covers_the_position_except_in_a_log_made_before_positions_were_chained() -> None:
    """DESIGN 7.11: a log whose positions were changed fails; a LEGACY log keeps its rule (and verifies)."""
    assert chain.link(chain.ZERO, STREAM, 1, "t", b"x", 1) != chain.link(chain.ZERO, STREAM, 1, "t", b"x", 5)
    assert chain.link(chain.ZERO, STREAM, 1, "t", b"x") not in {chain.link(chain.ZERO, STREAM, 1, "t", b"x", 1)}
    for fmt in chain.FORMATS:
        table = rows(records(3), fmt=fmt)
        moved = [(p, *rest) for p, (_, *rest) in zip((1, 5, 9), table, strict=True)]  # the same rows at 1, 5, 9
        breaks = [b.position for b in chain.verify(moved, fmt=fmt).breaks]
        assert breaks == ([] if fmt == chain.LEGACY else [5, 9])
        assert chain.verify(table, fmt=fmt).ok
        assert not chain.verify(table, fmt=chain.LEGACY if fmt == chain.POSITIONED else chain.POSITIONED).ok


def test_an_intact_chain_verifies_with_its_head() -> None:
    verdict = chain.verify(rows(records(5)), keep=3, fmt=FMT)
    assert verdict.ok and verdict.events == 5 and verdict.head == 5 and verdict.unchained == 0
    assert verdict.head_hash == chain.fold(chain.ZERO, records(5), FMT)
    assert verdict.hash_at == {3: chain.fold(chain.ZERO, records(3), FMT)}


def test_an_edit_is_reported_where_it_is_and_only_there() -> None:
    table = rows(records(6))
    position, stream, version, topic, _, stored = table[2]
    table[2] = (position, stream, version, topic, b"edited", stored)
    assert [b.position for b in chain.verify(table, fmt=FMT).breaks] == [3]


def test_a_removed_event_is_named_by_the_hash_it_left() -> None:
    table = rows(records(6))
    table[3] = (4, None, None, None, None, table[3][-1])  # the event is gone, its hash is not
    verdict = chain.verify(table, fmt=FMT)
    assert [b.position for b in verdict.breaks] == [4] and verdict.events == 5


def test_a_removed_event_and_its_hash_break_the_next_one() -> None:
    table = rows(records(6))
    del table[3]
    assert [b.position for b in chain.verify(table, fmt=FMT).breaks] == [5]


def test_swapped_events_are_reported() -> None:
    table = rows(records(6))
    (p1, *a), (p2, *b) = table[1], table[2]
    table[1], table[2] = (p1, *b[:-1], a[-1]), (p2, *a[:-1], b[-1])  # contents swapped, hashes left in place
    assert [b.position for b in chain.verify(table, fmt=FMT).breaks] == [2, 3]


def test_an_event_without_a_hash_after_the_chain_began_is_an_insertion() -> None:
    table = rows(records(4))
    table.append((5, STREAM, 99, "t", b"forged", None))
    assert [(b.position, "inserted" in b.problem) for b in chain.verify(table, fmt=FMT).breaks] == [(5, True)]


def test_events_without_their_hashes_are_one_break_and_covered_by_the_next_hash() -> None:
    table = rows(records(6), hashed_from=3)
    verdict = chain.verify(table, fmt=FMT)
    assert verdict.unchained == 3 and [(b.position, "events 1..3 (3)" in b.problem) for b in verdict.breaks] == [
        (1, True)
    ]
    position, stream, version, topic, _, stored = table[0]
    table[0] = (position, stream, version, topic, b"edited", stored)
    assert [b.position for b in chain.verify(table, fmt=FMT).breaks] == [1, 4]


def test_one_hash_removed_in_the_middle_is_a_break_there() -> None:
    table = rows(records(5))
    table[2] = (*table[2][:-1], None)
    assert [(b.position, "no chain record" in b.problem) for b in chain.verify(table, fmt=FMT).breaks] == [(3, True)]
