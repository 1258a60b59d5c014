"""Deployment changes read from the log, after a position: what sinks are sent, in log order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple
from uuid import UUID

from ...domain import phases
from ...domain.notification import Change, kind_of, reason_of
from ...domain.stage import promoted_from
from ...projections.records import Notification, decode, document, topic_parts
from ..store.reader import RecorderSource

if TYPE_CHECKING:
    from ..store.port import LogRecorder

PAGE = 500
MEMO_STREAMS = 10_000


class Seen(NamedTuple):
    """A deployment as of one of its events: enough to tell what its next event changes."""

    version: int  # the stream version of that event
    config: str
    revision: int
    attempt: int
    phase: str
    promoted_from: dict[str, Any] | None = None  # 7.10: {config, revision} of the promotion it is, if one


class ChangeReader:
    """Reads the log's deployment changes. A deployment's phase before an event is remembered from
    its previous event when that was read; otherwise its stream is folded up to there (a few events)."""

    def __init__(self, recorder: LogRecorder) -> None:
        self.recorder = recorder
        self.source = RecorderSource(recorder)
        self.seen: dict[str, Seen] = {}

    def head(self) -> int:
        return self.source.head()

    def changes(self, after: int, until: int) -> Iterator[Change]:
        """Every deployment change at a position in (after, until], in log order."""
        while after < until:
            rows = self.source.read(after, min(PAGE, until - after))
            if not rows:
                return
            for n in rows:
                if n.id > until:
                    return
                if topic_parts(n.topic)[0] == "deployment":
                    change = self._change(n)
                    if change is not None:
                        yield change
            after = rows[-1].id

    def _change(self, n: Notification) -> Change | None:
        r = decode(n)
        data = r.data
        before = self._before(r.stream, r.stream_version)
        source = before.promoted_from if before is not None else None
        if r.type == "Created":
            before = None
            config, revision, attempt = data["config"], data["revision"], 1
            source = _source(data)
        elif before is None:
            return None  # a stream without its Created event: nothing to say about it
        else:
            config, revision, attempt = before.config, before.revision, data.get("attempt", before.attempt)
        old = before.phase if before else None
        after = phases.phase_after(old, r.type, data)
        if len(self.seen) > MEMO_STREAMS:
            self.seen.clear()
        self.seen[r.stream] = Seen(r.stream_version, config, revision, attempt, after, source)
        kind = kind_of(old, r.type, after, data)
        if kind is None:
            return None
        reason = reason_of(r.type, data, after)
        actor = r.meta.get("actor")
        return Change(r.position, kind, config, revision, attempt, after, reason, actor, r.timestamp, source)

    def _before(self, stream: str, version: int) -> Seen | None:
        known = self.seen.get(stream)
        if known is not None and known.version == version - 1:
            return known
        found = None
        for stored in self.recorder.select_events(UUID(stream), lte=version - 1):
            state = stored.state
            _, data = document(state if isinstance(state, str) else state.decode())
            type_ = topic_parts(stored.topic)[1]
            if type_ == "Created":
                found = Seen(stored.originator_version, data["config"], data["revision"], 1, phases.NEW, _source(data))
            elif found is not None:
                phase = phases.phase_after(found.phase, type_, data)
                attempt = data.get("attempt", found.attempt)
                found = found._replace(version=stored.originator_version, attempt=attempt, phase=phase)
        return found


def _source(created: dict[str, Any]) -> dict[str, Any] | None:
    """The `promoted_from` of a deployment, from its Created event's cause (7.10)."""
    found = promoted_from(created.get("cause"))
    return None if found is None else {"config": found[0], "revision": found[1]}
