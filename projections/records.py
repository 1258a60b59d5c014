"""Event records as projections see them: decoded straight from stored notifications."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from domain.errors import StoreProblem


class UndecodableEvent(StoreProblem):
    """The log holds stored bytes that are not an event document (`what` says where): the log is damaged."""

    def __init__(self, what: str, error: Exception) -> None:
        why = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        super().__init__(f"{what} cannot be decoded ({why}); the log is damaged: 'rollouts log verify' shows where")


class Notification(Protocol):
    id: int
    originator_id: Any
    originator_version: int
    topic: str
    state: bytes


class Record(NamedTuple):
    """One event of the log, with its position (the notification id).

    A tuple, not a dataclass: a rebuild makes one per event, and they are read far more than made.
    """

    position: int
    stream: str
    stream_version: int
    kind: str  # "config" or "deployment"
    type: str
    timestamp: str
    data: dict[str, Any]
    text: str = ""  # the stored JSON document that data was decoded from

    @property
    def meta(self) -> dict[str, Any]:
        return self.data.get("meta") or {}


KINDS = {
    "domain.config:DeploymentConfig": "config",
    "domain.deployment:Deployment": "deployment",
    "domain.freeze:FreezeAll": "freeze",
}
_TOPICS: dict[str, tuple[str, str]] = {}  # a few dozen topics, split once each
_scan = json.JSONDecoder().scan_once  # json.loads without its two whitespace regexes (the log has none)
_new = tuple.__new__


def topic_parts(topic: str) -> tuple[str, str]:
    """(kind, type) of the events stored under `topic`."""
    found = _TOPICS.get(topic)
    if found is None:
        cls, _, type_ = topic.rpartition(".")
        _TOPICS[topic] = found = (KINDS.get(cls, cls), type_)
    return found


def known_topics() -> Mapping[str, tuple[str, str]]:
    """Every topic split so far, with its (kind, type)."""
    return _TOPICS


def document(text: str) -> tuple[str, dict[str, Any]]:
    """(timestamp, data) of an event document as the log stores it: the data without the timestamp
    and the class topic, and config_id as its hex digits."""
    try:
        data, end = _scan(text, 0)
    except StopIteration:
        end = -1
    if end != len(text):
        data = json.loads(text)
    stamp = data.pop("timestamp")["_data_"]
    data.pop("originator_topic", None)
    if "config_id" in data:
        data["config_id"] = data["config_id"]["_data_"]
    return stamp, data


def decode(n: Notification) -> Record:
    try:
        state = n.state
        text = state if isinstance(state, str) else state.decode()
        stamp, data = document(text)
    except (ValueError, KeyError, TypeError, AttributeError) as error:  # not UTF-8, not JSON, not an event's
        raise UndecodableEvent(f"the event at position {n.id}", error) from None
    kind, type_ = _TOPICS.get(n.topic) or topic_parts(n.topic)
    return _new(Record, (n.id, str(n.originator_id), n.originator_version, kind, type_, stamp, data, text))


_STAMPED = '{"timestamp":{"_type_":"datetime_iso","_data_":"'
_AFTER_STAMP = len(_STAMPED)


def decode_stamped(n: Notification) -> Record:
    """`decode(n)` without its data (left empty): the timestamp is cut from the text, unparsed,
    when the text starts as the log's documents do."""
    state = n.state
    try:
        text = state if isinstance(state, str) else state.decode()
    except UnicodeDecodeError as error:
        raise UndecodableEvent(f"the event at position {n.id}", error) from None
    end = text.find('"', _AFTER_STAMP) if text.startswith(_STAMPED) else -1
    if end < 0 or "\\" in text[_AFTER_STAMP:end]:
        return decode(n)._replace(data={})
    kind, type_ = _TOPICS.get(n.topic) or topic_parts(n.topic)
    stamp = text[_AFTER_STAMP:end]
    return _new(Record, (n.id, str(n.originator_id), n.originator_version, kind, type_, stamp, {}, text))
