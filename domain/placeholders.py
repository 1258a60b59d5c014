"""The placeholders of analysis templates (DESIGN 7.9): which a template names, which arguments it lacks, and
the values that replace them. Plain functions over a template (domain.analysis.TemplateSpec), with no
validation library, so commands that only check or resolve a template load none."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Protocol


class TemplateText(Protocol):
    """What these functions read of a template (domain.analysis.TemplateSpec has it)."""

    query: str | None
    url: str | None
    body: str | None
    headers: dict[str, str]
    command: list[str] | None
    args: dict[str, str | None]


ROLLOUT_PLACEHOLDERS = ("config", "version", "attempt", "step", "weight")
PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")


def placeholders_of(spec: TemplateText) -> list[str]:
    """Every placeholder the template's query, URL, headers, body and command name, in order."""
    texts = [spec.query, spec.url, spec.body, *spec.headers.values(), *(spec.command or [])]
    return [m.group(1) for text in texts if text for m in PLACEHOLDER.finditer(text)]


def known(placeholder: str, args: Mapping[str, str | None]) -> bool:
    kind, _, name = placeholder.partition(".")
    return (kind == "args" and name in args) or (kind == "rollout" and name in ROLLOUT_PLACEHOLDERS)


def missing_args(spec: TemplateText, given: Mapping[str, str]) -> list[str]:
    """The declared arguments with neither a value in `given` nor a default."""
    return [name for name, default in spec.args.items() if default is None and name not in given]


def unknown_args(spec: TemplateText, given: Mapping[str, str]) -> list[str]:
    """The arguments in `given` the template does not declare."""
    return [name for name in given if name not in spec.args]


def resolved(text: str, args: Mapping[str, str], rollout: Mapping[str, str]) -> str:
    """`text` with each placeholder replaced (KeyError: one no value was given for)."""

    def value(match: re.Match[str]) -> str:
        kind, _, name = match.group(1).partition(".")
        return (args if kind == "args" else rollout)[name]

    return PLACEHOLDER.sub(value, text)


def values_of(spec: TemplateText, given: Mapping[str, str]) -> dict[str, str]:
    """The arguments' values: those given, else their defaults (missing_args first names what lacks one)."""
    return {name: given.get(name, default or "") for name, default in spec.args.items()}
