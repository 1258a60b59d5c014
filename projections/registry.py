"""The read models this program keeps, by name."""

from __future__ import annotations

from collections.abc import Iterable

from ..domain.errors import UsageError
from .audit_view import AuditView
from .desired import Desired
from .history import History
from .projection import Projection

ALL: tuple[Projection, ...] = (Desired(), History(), AuditView())
BY_NAME = {p.name: p for p in ALL}


class UnknownProjection(UsageError):
    pass


def projections_named(names: Iterable[str]) -> list[Projection]:
    chosen = []
    for name in names:
        if name not in BY_NAME:
            raise UnknownProjection(f"no projection named {name!r} (known: {', '.join(BY_NAME)})")
        chosen.append(BY_NAME[name])
    return chosen or list(ALL)
