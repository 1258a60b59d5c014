"""The runtime's reports as changes to a deployment: what a pass appends for a deployer's row (created,
started, exited, lost), each a commands.Report the executor applies with the others of its batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from ...domain.meta import Meta
from ...service import commands
from .plan import Action, Kind


def _record_created(name: str, a: Action, meta: Meta) -> commands.Report:
    return lambda d: d.report_created(name, f"local:{name}", meta)


def _record_started(name: str, a: Action, meta: Meta) -> commands.Report:
    return lambda d: d.report_started(name, meta)


def _record_exit(name: str, a: Action, meta: Meta) -> commands.Report:
    return lambda d: d.report_exited(name, cast(int, a.exit_code), a.reason, meta)  # plan: an exited row's code


def _record_lost(name: str, a: Action, meta: Meta) -> commands.Report:
    return lambda d: d.report_lost(name, a.reason or "gone", meta)


# A report is not run alone: each is a change that Executor._change applies, with the others of its batch,
# to the deployment; the change is False when the deployment has moved past it (a stale report).
Reporter = Callable[[str, Action, Meta], commands.Report]
REPORTERS: dict[Kind, Reporter] = {
    Kind.RECORD_CREATED: _record_created,
    Kind.RECORD_STARTED: _record_started,
    Kind.RECORD_EXIT: _record_exit,
    Kind.RECORD_LOST: _record_lost,
}
