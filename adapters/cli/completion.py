"""Shell completion callbacks of config and deployer names (click's `shell_complete`).

Every command naming a config or a deployer attaches one of these as it loads; what they read (the views,
the log, the runtime's table: completion_reads.py) loads on the first Tab, not with every command."""

from __future__ import annotations

from types import ModuleType

import click
from click.shell_completion import CompletionItem


def configs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Config names from the home's history view and the log's newest rows."""
    return _reads().configs(ctx, param, incomplete)


def deployers(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Deployer names from the home's runtime table."""
    return _reads().deployers(ctx, param, incomplete)


def _reads() -> ModuleType:
    from . import completion_reads  # start-up cost: the views, the store and the runtime's table, on a Tab only

    return completion_reads
