"""Event records as projections see them: decoded straight from stored notifications."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol


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


KINDS = {"domain.config:DeploymentConfig": "config", "domain.deployment:Deployment": "deployment"}
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


def decode(n: Notification) -> Record:
    state = n.state
    text = state if isinstance(state, str) else state.decode()
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
    kind, type_ = _TOPICS.get(n.topic) or topic_parts(n.topic)
    return _new(Record, (n.id, str(n.originator_id), n.originator_version, kind, type_, stamp, data, text))


_STAMPED = '{"timestamp":{"_type_":"datetime_iso","_data_":"'
_TOPIC = ',"originator_topic":"'
_UUID = ',"config_id":{"_type_":"uuid_hex","_data_":"'


def data_json(r: Record) -> str:
    """json.dumps(r.data, separators=(",", ":")), cut from the stored text when that is certain to be the same.

    The log's documents are compact Python JSON of a dict (eventsourcing's transcoder: no
    duplicate keys, nothing reordered, ensure_ascii off). For printable ASCII text, dumping
    the decoded data again gives the text less what decode took out: the leading timestamp,
    the class topic after it, and config_id (after that) unwrapped from its uuid wrapper.
    """
    text, stamp = r.text, r.timestamp
    if text.isascii() and "\x7f" not in text and type(stamp) is str:
        head = f'{_STAMPED}{stamp}"}}'
        if text.startswith(head):
            cut = _cut(text, len(head), r.data)
            if cut is not None:
                return cut
    return json.dumps(r.data, separators=(",", ":"))


def _cut(text: str, at: int, data: dict[str, Any]) -> str | None:
    if text.startswith(_TOPIC, at):
        end = text.find('"', at + len(_TOPIC))
        if end < 0 or "\\" in text[at:end]:
            return None
        at = end + 1
    if text.find('"originator_topic":', at) >= 0:
        return None  # not where decode's pop would leave the text as it is
    if "config_id" not in data:
        return "{" + text[at + 1 :] if text.startswith(",", at) else "{}" if text[at:] == "}" else None
    hex_ = data["config_id"]
    if type(hex_) is not str or not text.startswith(f'{_UUID}{hex_}"}}', at):
        return None
    return f'{{"config_id":"{hex_}"{text[at + len(_UUID) + len(hex_) + 2 :]}'
