"""The topics the log stores our events under, kept as they were before the package was named `rollouts`.

The library names an event `module:qualname`; our modules moved from `domain.config` to
`rollouts.domain.config`, but logs written before (and every log since: one name for one
event) say `domain.config:DeploymentConfig.Registered`. Each aggregate module calls
`keep_stored_topics` once its classes exist, so new events are written under the stored
name and old ones resolve to the same class.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import Aggregate, CanMutateAggregate
from eventsourcing.utils import register_topic

PACKAGE = "rollouts."  # what the module names gained; the stored topics are without it


def stored_topic(cls: type) -> str:
    """The topic the log holds for CLS: its module without the package's name, and its qualname."""
    return f"{cls.__module__.removeprefix(PACKAGE)}:{cls.__qualname__}"


def keep_stored_topics(module_globals: dict[str, Any]) -> None:
    """Give each aggregate of a module, and each of its events, its stored topic (its own, not inherited)."""
    name = module_globals["__name__"]
    if not name.startswith(PACKAGE):  # a second copy of the classes would fight over the stored topics
        raise ImportError(f"import {PACKAGE}{name}, not {name}: the folders of rollouts are not packages of their own")
    for value in list(module_globals.values()):
        if isinstance(value, type) and issubclass(value, Aggregate) and value.__module__ == name:
            _keep(value)


def _keep(cls: type) -> None:
    topic = stored_topic(cls)
    type.__setattr__(cls, "TOPIC", topic)
    register_topic(topic, cls)
    for inner in list(vars(cls).values()):
        if isinstance(inner, type) and issubclass(inner, CanMutateAggregate) and inner.__module__ == cls.__module__:
            _keep(inner)
