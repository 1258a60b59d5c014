"""The HTML pages of `rollouts serve`, rendered on the server from Jinja2 templates (templates/, autoescaped:
every value from the log is escaped by the template engine, never by hand)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from markupsafe import Markup

TEMPLATES = Path(__file__).parent / "templates"  # package data: installed beside this module
LEGEND = ("complete", "failed", "cancelled", "open")
MEASURED = ("passed", "failed", "inconclusive")  # a measurement's outcomes, as the charts colour them
HISTORY_COLUMNS = ("version", "phase", "attempt", "reason", "cause", "message", "actor", "created_at", "finished_at")
EVENT_COLUMNS = ("position", "timestamp", "version", "attempt", "type", "actor")
LONG_COLUMNS = frozenset({"reason", "message", "actor", "cause", "type"})  # wrap, whole value on hover
FILTER_KEYS = ("type", "version", "actor", "after", "limit")


@cache
def environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(("html", "svg")),
        undefined=jinja2.StrictUndefined,  # a name a template misses is a bug, not an empty cell
        trim_blocks=True,
    )
    environment.globals["long_columns"] = LONG_COLUMNS
    return environment


def render(template: str, **values: object) -> str:
    return environment().get_template(template).render(**values)


def index(
    configs: Sequence[Mapping[str, Any]], head: int, pipelines: Sequence[Sequence[Mapping[str, Any]]] = ()
) -> str:
    """Every config with its latest version and phase, each linking to its own page; and each pipeline of
    stages (7.10) as a row."""
    live = _poll({"after": head})
    return render("index.html", title="configs", live=live, configs=configs, head=head, pipelines=pipelines)


@dataclass(frozen=True)
class Analysis:
    """What a config's page charts (DESIGN 7.9): the charts drawn by charts.py, of `deployment`'s latest attempt
    (None: there is none, or no `asked` version ?version=N)."""

    charts: str
    deployment: Mapping[str, Any] | None
    asked: int | None


def config(
    row: Mapping[str, Any],
    timeline: str,
    analysis: Analysis,
    history: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    filters: Mapping[str, str],
    next_after: int | None,
    head: int,
) -> str:
    """One config: its spec, its attempts on a timeline, an attempt's analysis, its deployments and its events
    (filtered)."""
    name = row["name"]
    next_query = None
    if next_after is not None:
        next_query = urlencode({k: v for k, v in filters.items() if v} | {"after": str(next_after)})
    return render(
        "config.html",
        title=name,
        live=_poll({"config": name, "after": head}),
        row=row,
        command=json.dumps(row["spec"]["command"]),
        legend=LEGEND,
        timeline=Markup(timeline),  # drawn by the timeline template, escaped there
        analysis=analysis,
        charts=Markup(analysis.charts),  # drawn by the charts template, escaped there
        measured=MEASURED,
        history_columns=HISTORY_COLUMNS,
        history=history,
        event_columns=EVENT_COLUMNS,
        events=events,
        filter_keys=FILTER_KEYS,
        filters=filters,
        next_query=next_query,
    )


def _poll(query: dict[str, object]) -> str:
    """What the page asks every half second (templates/live.js): 304 until an event past the page's head."""
    return "/api/events?" + urlencode({**query, "limit": 1})


def error(status: int, message: str) -> str:
    return render("error.html", title=str(status), live=None, status=status, message=message)
