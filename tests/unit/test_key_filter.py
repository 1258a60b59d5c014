"""projections/key_filter.py: every key added is in; a key never added rarely is (a fold then reads, finds nothing)."""

from __future__ import annotations

from rollouts.projections.key_filter import KeyFilter


def test_every_key_added_is_found_and_few_others_are() -> None:
    found = KeyFilter()
    streams = [f"{i:08x}-1f2e-4d3c-8b4a-{i * 7919:012x}" for i in range(200_000)]
    found.update(streams)
    found.update(range(1000))  # ints hash to themselves: mixed before their bits are taken
    assert all(s in found for s in streams) and all(i in found for i in range(1000))
    strangers = sum(f"other-{i}" in found for i in range(200_000))
    strangers += sum(i in found for i in range(10**6, 10**6 + 10**5))
    assert strangers < 50  # ~2 expected at this fill
