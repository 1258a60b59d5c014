"""The HTML pages of `rollouts serve`, rendered on the server; every value from the log is escaped."""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em 2em; color: #1b1f24; }
h1 { font-size: 1.4em; margin: 0 0 .6em } h2 { font-size: 1.1em; margin: 1.4em 0 .4em }
table { border-collapse: collapse; } th, td { padding: 3px 10px; text-align: left; border-bottom: 1px solid #dde; }
th { background: #f3f4f8; font-weight: 600 } td { white-space: nowrap } td code { white-space: normal }
td.num { text-align: right } code { font-size: 12px }
.phase { padding: 1px 7px; border-radius: 9px; color: #fff; background: #6b7280; font-size: 12px }
.phase-Complete { background: #15803d } .phase-Failed { background: #b91c1c }
.phase-Running, .phase-Pending { background: #1d4ed8 } .phase-New { background: #7c3aed }
svg.timeline rect.attempt { stroke: #0003 } svg.timeline text { font-size: 11px; fill: #374151 }
svg.timeline line.tick { stroke: #e5e7eb }
svg.timeline line.mark { stroke: #111827; stroke-width: 2 } svg.timeline line.mark-failed { stroke: #b91c1c }
svg.timeline line.mark-inconclusive { stroke: #b45309 } svg.timeline line.mark-paused { stroke-dasharray: 2 2 }
rect.outcome-complete { fill: #16a34a } rect.outcome-failed { fill: #dc2626 }
rect.outcome-cancelled { fill: #9ca3af } rect.outcome-open { fill: #2563eb }
.legend span { margin-right: 1em } .legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px }
form.filters input { width: 9em } nav a { margin-right: 1em } .muted { color: #6b7280 }
"""
LEGEND = (("complete", "#16a34a"), ("failed", "#dc2626"), ("cancelled", "#9ca3af"), ("open", "#2563eb"))
HISTORY_COLUMNS = ("version", "phase", "attempt", "reason", "cause", "message", "actor", "created_at", "finished_at")
EVENT_COLUMNS = ("position", "timestamp", "version", "attempt", "type", "actor")


def page(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} · rollouts</title><style>{STYLE}</style></head>\n"
        f'<body><nav><a href="/">configs</a><a href="/metrics">metrics</a><a href="/api/configs">api</a></nav>\n'
        f"{body}\n</body></html>\n"
    )


def index(configs: Sequence[dict[str, Any]], head: int) -> str:
    """Every config with its latest version and phase, each linking to its own page."""
    rows = [
        "<tr>"
        f'<td><a class="config" href="/configs/{quote(c["name"])}">{escape(c["name"])}</a></td>'
        f'<td class="num">{_text(c["latest_version"])}</td><td>{_phase(c["latest_phase"])}</td>'
        f"<td>{'yes' if c['paused'] else 'no'}</td><td><code>{_text(c['command'])}</code></td></tr>"
        for c in configs
    ]
    table = _table(("name", "latest version", "latest phase", "paused", "command"), rows, "No configs.")
    return page("configs", f'<h1>Configs</h1><p class="muted">log head: position {head}</p>\n{table}')


def config(
    row: dict[str, Any],
    timeline: str,
    history: Sequence[dict[str, Any]],
    events: Sequence[dict[str, Any]],
    filters: dict[str, str],
    next_after: int | None,
) -> str:
    """One config: its spec, its attempts on a timeline, its deployments and its events (filtered)."""
    name = row["name"]
    legend = "".join(f'<span><i style="background:{c}"></i>{o}</span>' for o, c in LEGEND)
    spec = row["spec"]
    facts = (
        f"<p>command <code>{_text(json.dumps(spec['command']))}</code> · latest version "
        f"{_text(row['latest_version'])} {_phase(row['latest_phase'])} · {'paused' if row['paused'] else 'not paused'}"
        f' · <a href="/api/configs/{quote(name)}/history">history as JSON</a></p>'
    )
    body = [
        f"<h1>{escape(name)}</h1>",
        facts,
        "<h2>Timeline</h2>",
        f'<p class="legend">{legend}<span class="muted">one bar per attempt, from its claim to its end'
        " (hooks included)</span></p>",
        timeline,
        "<h2>History</h2>",
        _table(HISTORY_COLUMNS, [_row(d, HISTORY_COLUMNS) for d in history], "No deployment yet."),
        "<h2>Events</h2>",
        _filters(name, filters),
        _table(EVENT_COLUMNS, [_row(e, EVENT_COLUMNS) for e in events], "No events match."),
    ]
    if next_after is not None:
        more = {k: v for k, v in filters.items() if v} | {"after": str(next_after)}
        body.append(f'<p><a class="next" href="/configs/{quote(name)}?{escape(urlencode(more))}">next page</a></p>')
    return page(name, "\n".join(body))


def error(status: int, message: str) -> str:
    return page(str(status), f"<h1>{status}</h1><p>{escape(message)}</p>")


def _filters(name: str, filters: dict[str, str]) -> str:
    fields = "".join(
        f'<label>{key} <input name="{key}" value="{escape(filters.get(key, ""))}"></label> '
        for key in ("type", "version", "actor", "after", "limit")
    )
    return f'<form class="filters" method="get" action="/configs/{quote(name)}">{fields}<button>filter</button></form>'


def _table(columns: Sequence[str], rows: Sequence[str], empty: str) -> str:
    if not rows:
        return f'<p class="muted">{escape(empty)}</p>'
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n" + "\n".join(rows) + "\n</tbody></table>"


def _row(values: dict[str, Any], columns: Sequence[str]) -> str:
    return "<tr>" + "".join(f"<td>{_cell(c, values.get(c))}</td>" for c in columns) + "</tr>"


def _cell(column: str, value: Any) -> str:
    if column == "phase":
        return _phase(value)
    if value is not None and (column.endswith("_at") or column == "timestamp"):
        # The whole time on hover; the table shows it to the millisecond, in UTC as the log keeps it.
        shown = str(value)[:23].replace("T", " ")
        return f'<time datetime="{escape(str(value))}" title="{escape(str(value))}">{escape(shown)}</time>'
    return _text(value)


def _phase(phase: str | None) -> str:
    if phase is None:
        return '<span class="muted">none</span>'
    return f'<span class="phase phase-{escape(phase)}">{escape(phase)}</span>'


def _text(value: Any) -> str:
    return '<span class="muted">-</span>' if value is None else escape(str(value))
