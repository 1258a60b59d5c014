"""Event records as projections see them: decoded straight from stored notifications."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol


class Notification(Protocol):
    id: int
    originator_id: Any
    originator_version: int
    topic: str
    state: bytes


@dataclass(frozen=True, slots=True)
class Record:
    """One event of the log, with its position (the notification id)."""

    position: int
    stream: str
    stream_version: int
    kind: str  # "config" or "deployment"
    type: str
    timestamp: str
    data: dict[str, Any]

    @property
    def meta(self) -> dict[str, Any]:
        return self.data.get("meta") or {}


def _plain(value: Any) -> Any:
    """Unwrap the transcoder's {"_type_", "_data_"} values (uuid_hex, datetime_iso)."""
    if isinstance(value, dict):
        if "_type_" in value and "_data_" in value and len(value) == 2:
            return value["_data_"]
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


_KINDS = {"domain.config:DeploymentConfig": "config", "domain.deployment:Deployment": "deployment"}


def decode(n: Notification) -> Record:
    data = json.loads(n.state)
    stamp = data.pop("timestamp")["_data_"]
    data.pop("originator_topic", None)
    if "config_id" in data:
        data["config_id"] = data["config_id"]["_data_"]
    cls, _, type_ = n.topic.rpartition(".")
    return Record(
        position=n.id,
        stream=str(n.originator_id),
        stream_version=n.originator_version,
        kind=_KINDS.get(cls, cls),
        type=type_,
        timestamp=stamp,
        data=data,
    )
