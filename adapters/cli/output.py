"""Rendering read results: aligned tables for people, one JSON document for scripts."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from ..service.documents import json_text
from . import JOINERS

F = TypeVar("F", bound=Callable[..., Any])


def output_option(f: F) -> F:
    return click.option(
        "-o",
        "--output",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="Output format; json prints one JSON document.",
    )(f)


def emit_json(document: object) -> None:

    click.echo(json_text(document))


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    """Print `columns` of `rows` aligned, with an upper-case header, like kubectl."""
    cells = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    click.echo("\n".join(line.rstrip() for line in lines))


def cell(value: object) -> str:
    """`value` as one line of a table or a detail view: None as <none>, a line break or any other character
    that is not printable as a space, runs of them as one (a message of several lines must not pass for
    more fields, nor a reason written by anyone send escape sequences to the terminal that reads it)."""
    if value is None:
        return "<none>"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    text = str(value)
    if text.isprintable():
        return text
    return " ".join("".join(c if c.isprintable() or c in JOINERS else " " for c in text).split())


def show(rows: Sequence[dict[str, Any]], columns: Sequence[str], output: str, empty: str) -> None:
    if output == "json":
        emit_json(list(rows))
    elif rows:
        table(rows, columns)
    else:
        click.echo(empty, err=True)
