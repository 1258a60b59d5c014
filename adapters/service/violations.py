"""The audit's verdict as a type: every violation (domain.audit.Violation, each naming its rule) in log order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...domain.audit import Violation

if TYPE_CHECKING:
    from ...projections.refold import Differing


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
