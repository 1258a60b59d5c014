"""The shape every read model has: a name, a version, its tables, and a batch fold."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import sqlite_utils

from projections.records import Record


class Projection(ABC):
    """A deterministic fold of records into tables. Bump `version` when the code changes."""

    name: ClassVar[str]
    version: ClassVar[int]
    tables: ClassVar[tuple[str, ...]]

    @abstractmethod
    def create(self, db: sqlite_utils.Database) -> None:
        """Create the tables and indexes (called inside the first transaction)."""

    @abstractmethod
    def apply(self, db: sqlite_utils.Database, records: Sequence[Record]) -> None:
        """Fold `records` (all after the tracked position, in order) into the tables."""
