"""A click group whose commands named in a table load only when used: `--help` and the other commands
start without their modules. The table gives each its module, attribute and the one line of help the
group's own `--help` prints (tests/unit/test_lazy_commands.py holds it to the command's own)."""

from __future__ import annotations

import importlib
from typing import Any

import click

Lazy = dict[str, tuple[str, str, str]]  # command -> (module, attribute, one-line help)


class LazyGroup(click.Group):
    def __init__(self, *args: Any, lazy: Lazy | None = None, **kwargs: Any) -> None:  # why: click.Group's own
        super().__init__(*args, **kwargs)
        self.lazy: Lazy = lazy or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        """A group of lazy commands alone keeps its table's order; mixed with commands of its own, by name."""
        eager = super().list_commands(ctx)
        return sorted([*eager, *self.lazy]) if eager else list(self.lazy)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            module, attribute, _ = self.lazy[name]
            return getattr(importlib.import_module(module), attribute)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        limit = formatter.width - 6 - max(len(name) for name in self.list_commands(ctx))
        for name in self.list_commands(ctx):
            if name in self.lazy:  # shortened as click shortens a command's own first line
                rows.append((name, click.Command(name, help=self.lazy[name][2]).get_short_help_str(limit)))
            else:
                command = super().get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
