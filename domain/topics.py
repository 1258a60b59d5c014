"""The topics the log stores our events under, kept as they were before the package was named `rollouts`.

The library names an event `module:qualname`; our modules moved from `domain.config` to
`rollouts.domain.config`, but logs written before (and every log since: one name for one
event) say `domain.config:DeploymentConfig.Registered`. Each aggregate module calls
`keep_stored_topics` once its classes exist, so new events are written under the stored
name and old ones resolve to the same class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eventsourcing.domain import Aggregate, CanMutateAggregate
from eventsourcing.utils import register_topic

PACKAGE = "rollouts."  # what the module names gained; the stored topics are without it


def stored_topic(cls: type, renamed: Mapping[str, str] | None = None) -> str:
    """The topic the log holds for CLS: its module without the package's name, and its qualname, whose
    outer class keeps the name it had when the log was written (`renamed`: new name -> stored name)."""
    outer, dot, inner = cls.__qualname__.partition(".")
    outer = (renamed or {}).get(outer, outer)
    return f"{cls.__module__.removeprefix(PACKAGE)}:{outer}{dot}{inner}"


def keep_stored_topics(module_globals: dict[str, Any], renamed: Mapping[str, str] | None = None) -> None:
    """Give each aggregate of a module, and each of its events, its stored topic (its own, not inherited);
    `renamed` maps a class renamed since logs were written to the name its stored topics keep."""
    name = module_globals["__name__"]
    if not name.startswith(PACKAGE):  # a second copy of the classes would fight over the stored topics
        raise ImportError(f"import {PACKAGE}{name}, not {name}: the folders of rollouts are not packages of their own")
    found = {id(v): v for v in module_globals.values() if isinstance(v, type) and issubclass(v, Aggregate)}
    for value in found.values():  # (once each: a class may have a second name in the module)
        if value.__module__ == name:
            _keep(value, renamed)


def _keep(cls: type, renamed: Mapping[str, str] | None) -> None:
    topic = stored_topic(cls, renamed)
    type.__setattr__(cls, "TOPIC", topic)
    register_topic(topic, cls)
    for inner in list(vars(cls).values()):
        if isinstance(inner, type) and issubclass(inner, CanMutateAggregate) and inner.__module__ == cls.__module__:
            _keep(inner, renamed)
