"""The audit's verdict as types: each violation names its rule; the report holds them in log order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..projections.refold import Differing


@dataclass(frozen=True)
class Violation:
    """One break of rule `rule` ("I1", "G2", ...) found at `position`; `config` and `revision` where it is
    about one deployment, `view` where a view of the home differs from the log's fold (I5)."""

    rule: str
    position: int
    message: str
    config: str | None = None
    revision: int | None = None
    view: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """As `audit -o json` shows it (DESIGN 7 keeps the key `version` for a revision)."""
        shown: dict[str, Any] = {"position": self.position, "config": self.config, "version": self.revision}
        shown["rule"] = self.rule
        if self.view is not None:
            shown["view"] = self.view
        shown["message"] = self.message
        return shown


@dataclass(frozen=True)
class AuditReport:
    """The verdict: how many events were checked, every violation in log order, and the views that differ."""

    events: int
    violations: list[Violation]
    views_differing: list[Differing]

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict[str, Any]:
        """`audit -o json`."""
        return {
            "ok": self.ok,
            "events": self.events,
            "violations": [v.as_dict() for v in self.violations],
            "views_differing": [d.as_dict() for d in self.views_differing],
        }
