"""The checks of a stage's config (DESIGN 7.10), made in the decision that saves its spec: its upstream exists,
and `--from` makes no cycle."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...domain import stage

if TYPE_CHECKING:
    from .deciding import DecidingApp


def check_config(app: DecidingApp, name: str, spec: dict[str, Any]) -> None:
    """Refuse a stage whose upstream is missing (NotFound: exit 4) or whose `--from` closes a cycle (exit 2).
    Each upstream read is guarded: a racing `config set` that would close a cycle makes this save fail and
    the command decide again."""
    policy = stage.policy_of(spec)
    if policy is None:
        return

    def upstream_of(other: str) -> str | None:
        config = app.config(other)
        app.guard(config.id, config.version)
        found = stage.policy_of(config.spec)
        return found.upstream if found is not None else None

    stage.check_no_cycle(name, policy.upstream, upstream_of)
