"""Event records as projections see them: decoded straight from stored notifications."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol
from uuid import UUID

import orjson

from ..domain.errors import StoreProblem


class UndecodableEvent(StoreProblem):
    """The log holds stored bytes that are not an event document (`what` says where): the log is damaged."""

    def __init__(self, what: str, error: Exception) -> None:
        why = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        super().__init__(f"{what} cannot be decoded ({why}); the log is damaged: 'rollouts log verify' shows where")

    def __reduce__(self) -> tuple[Any, tuple[str]]:  # crosses from a worker process whole (a parallel export)
        return (_undecodable, (str(self),))


def _undecodable(message: str) -> UndecodableEvent:
    error = UndecodableEvent.__new__(UndecodableEvent)
    StoreProblem.__init__(error, message)
    return error


class Notification(Protocol):
    id: int
    originator_version: int
    topic: str
    state: bytes

    @property
    def originator_id(self) -> UUID | str:
        """The stream: a UUID from the library, text from a row the log gave directly (log_file.Row)."""
        ...


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
_loads = orjson.loads  # about twice json's speed; what it refuses (NaN, huge integers) json reads
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


def document(text: str | bytes) -> tuple[str, dict[str, Any]]:
    """(timestamp, data) of an event document as the log stores it: the data without the timestamp
    and the class topic, and config_id as its hex digits."""
    try:
        data = _loads(text)
    except orjson.JSONDecodeError:
        data = json.loads(text)  # NaN, integers past 64 bits, lone surrogates: as the library reads them
    stamp = data.pop("timestamp")["_data_"]
    data.pop("originator_topic", None)
    if "config_id" in data:
        data["config_id"] = data["config_id"]["_data_"]
    return stamp, data


def fields(text: str | bytes) -> dict[str, Any]:
    """The fields of an event document as stored, its timestamp, class topic and config_id left as they are:
    for a reader of the event's own fields only (a third faster than `document`, which reshapes those three)."""
    try:
        return _loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)  # as `document` reads what orjson refuses


def decode(n: Notification) -> Record:
    return record(n.id, str(n.originator_id), n.originator_version, n.topic, n.state)


def record(position: int, stream: str, version: int, topic: str, state: bytes | str) -> Record:
    """The record of a stored event, from its parts as the log keeps them (the stream dashed)."""
    try:
        text = state if isinstance(state, str) else state.decode()
        stamp, data = document(text)
        kind, type_ = _TOPICS.get(topic) or topic_parts(topic)
    except (ValueError, KeyError, TypeError, AttributeError) as error:  # not UTF-8, not JSON, not an event's
        raise UndecodableEvent(f"the event at position {position}", error) from None
    return _new(Record, (position, stream, version, kind, type_, stamp, data, text))


_STAMPED = '{"timestamp":{"_type_":"datetime_iso","_data_":"'
_AFTER_STAMP = len(_STAMPED)


def decode_stamped(n: Notification) -> Record:
    """`decode(n)` without its data (left empty): the timestamp is cut from the text, unparsed,
    when the text starts as the log's documents do."""
    return record_stamped(n.id, str(n.originator_id), n.originator_version, n.topic, n.state)


def record_stamped(position: int, stream: str, version: int, topic: str, state: bytes | str) -> Record:
    """`record(...)` without its data (see decode_stamped)."""
    try:
        text = state if isinstance(state, str) else state.decode()
        kind, type_ = _TOPICS.get(topic) or topic_parts(topic)
    except (UnicodeDecodeError, TypeError, AttributeError) as error:  # not UTF-8; a NULL or a number (edited)
        raise UndecodableEvent(f"the event at position {position}", error) from None
    end = text.find('"', _AFTER_STAMP) if text.startswith(_STAMPED) else -1
    if end < 0 or "\\" in text[_AFTER_STAMP:end]:
        return record(position, stream, version, topic, state)._replace(data={})
    return _new(Record, (position, stream, version, kind, type_, text[_AFTER_STAMP:end], {}, text))
