"""Keys a fold has written and no longer keeps, in a fixed 4 MiB: a set that may say yes to a key never added
(a Bloom filter), never no to one added.

A rebuild's table (projections.rows.Table) must tell a key it forgot, to read its row back, from a key it never
wrote, which it knows missing without a read. A set of the forgotten keys did that exactly, but grew with the log
(~100 bytes a key, a few keys a deployment: tens of MiB a million events). Here a key sets 3 bits of 2**25 and
the filter never grows: a yes to a key never added costs one read that finds nothing, so the fold stays exact.
That happens about twice in 100,000 keys asked once 300,000 are in (a 3M-event log's deployments), once in
80 at 3M keys.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

BITS = 1 << 25
_MASK = BITS - 1
_SHIFTS = (0, 20, 39)  # three 25-bit slices of a 64-bit hash, one bit each
_MIX = 0x9E3779B97F4A7C15  # an odd 64-bit constant: spreads the bits of small hashes (ints hash to themselves)
_WORD = (1 << 64) - 1


class KeyFilter:
    """`add` keys, then `key in filter`: True for every key added, and rarely for one that was not."""

    def __init__(self) -> None:
        self.bits = bytearray(BITS >> 3)

    def add(self, key: Hashable) -> None:
        bits, mixed = self.bits, (hash(key) * _MIX) & _WORD
        for shift in _SHIFTS:
            bit = (mixed >> shift) & _MASK
            bits[bit >> 3] |= 1 << (bit & 7)

    def update(self, keys: Iterable[Hashable]) -> None:
        for key in keys:
            self.add(key)

    def __contains__(self, key: object) -> bool:
        bits, mixed = self.bits, (hash(key) * _MIX) & _WORD
        for shift in _SHIFTS:
            bit = (mixed >> shift) & _MASK
            if not bits[bit >> 3] & (1 << (bit & 7)):
                return False
        return True
