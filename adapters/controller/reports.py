"""The runtime's reports as changes to a deployment: what a pass appends for a deployer's row (created,
started, exited, lost), each a commands.Report the executor applies with the others of its batch."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import cast

from ...domain.deployment import Deployment
from ...domain.measured import Measured, said
from ...domain.meta import Meta
from ..service import commands
from .plan import Action, Kind


def _record_created(name: str, a: Action, meta: Meta) -> commands.Report:
    return lambda d: d.report_created(name, f"local:{name}", meta)


def _record_started(name: str, a: Action, meta: Meta) -> commands.Report:
    return lambda d: d.report_started(name, meta)


def record_exit(
    name: str, a: Action, meta: Meta, said: Callable[[str], Measured | None] = lambda _: None
) -> commands.Report:
    """The exit of `name` (plan: an exited row's code); a template's measurement also said its value and why
    it was inconclusive (`said`, read only for such a measurement)."""

    def change(d: Deployment) -> bool:
        template = d.step is not None and d.step.name == name and d.step.template is not None
        return d.report_exited(name, cast(int, a.exit_code), a.reason, meta, said(name) if template else None)

    return change


def said_in(log: Path) -> Measured | None:
    """What a template's measurement process said of itself: the JSON document of its output's last line."""
    try:
        with log.open("rb") as lines:
            lines.seek(0, os.SEEK_END)
            lines.seek(max(0, lines.tell() - 4096))  # the last line is short: a value and an error, each cut
            last = lines.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return None
    return said(last[-1]) if last else None


def _record_lost(name: str, a: Action, meta: Meta) -> commands.Report:
    return lambda d: d.report_lost(name, a.reason or "gone", meta)


# A report is not run alone: each is a change that Executor._change applies, with the others of its batch,
# to the deployment; the change is False when the deployment has moved past it (a stale report).
Reporter = Callable[[str, Action, Meta], commands.Report]
REPORTERS: dict[Kind, Reporter] = {
    Kind.RECORD_CREATED: _record_created,
    Kind.RECORD_STARTED: _record_started,
    Kind.RECORD_EXIT: record_exit,
    Kind.RECORD_LOST: _record_lost,
}
