"""Every type of event the domain records, by the name the log (and `events --type`) gives it."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from eventsourcing.domain import DomainEvent
from eventsourcing.utils import get_topic

from .. import domain


@cache
def event_types() -> frozenset[str]:
    """The names of the event classes of every aggregate in `domain` (a new one counts at once)."""
    return frozenset(cls.__name__ for cls in _ours())


@cache
def event_topics() -> frozenset[str]:
    """The topics the log stores the events of `event_types` under (the library's `module:qualname`)."""
    return frozenset(get_topic(cls) for cls in _ours())


def _ours() -> list[type]:
    for module in pkgutil.iter_modules(domain.__path__):
        importlib.import_module(f"{domain.__name__}.{module.name}")
    ours = (cls for cls in _subclasses(DomainEvent) if cls.__module__.startswith(f"{domain.__name__}."))
    return [cls for cls in ours if cls.__name__ != "Event"]


def _subclasses(cls: type) -> list[type]:
    found = []
    subclasses: list[type] = cls.__subclasses__()
    for sub in subclasses:
        found += [sub, *_subclasses(sub)]
    return found
