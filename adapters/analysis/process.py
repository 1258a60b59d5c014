"""The measurement process (DESIGN 7.9): `python -m rollouts measure --resolved` runs the resolved template in
$ROLLOUT_ANALYSIS with its provider, decides the outcome, prints one line for a human and, as its last line,
one JSON document for the controller, and exits 0 passed, 1 failed, 2 inconclusive.

The document is `TemplateSpec.model_dump(mode="json", exclude_none=True)` with its placeholders resolved, plus
`"name": "TEMPLATE@VERSION"`; the variables its `*_env` fields name are read from this process's environment
and never printed. It is read as plain JSON (no validation library): this process's start-up is its cost.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping
from typing import NamedTuple

from ...domain import measured
from ...domain.condition import Value
from ...domain.measured import Outcome
from . import http, prometheus
from .asking import MissingVariable, ProviderAnswer, failed, variable, where

DOCUMENT = "ROLLOUT_ANALYSIS"
EXIT_CODES: dict[Outcome, int] = {"passed": 0, "failed": 1, "inconclusive": 2}
ON_EMPTY: tuple[Outcome, ...] = ("inconclusive", "failed", "passed")


class Measurement(NamedTuple):
    """A measurement's outcome, its value as an event keeps it, and why it is inconclusive (None if it is not)."""

    outcome: Outcome
    value: Value
    error: str | None


class Malformed(ValueError):
    """A document the controller should never have written (the measurement is inconclusive, saying so)."""


def measure(document: Mapping[str, object], environ: Mapping[str, str]) -> Measurement:
    """Ask the document's provider and decide the outcome under its conditions (domain.measured.outcome)."""
    try:
        success, failure = _text(document, "success"), _text(document, "failure")
        on_empty = next((o for o in ON_EMPTY if o == document.get("on_empty", "inconclusive")), None)
        if on_empty is None:
            raise Malformed("on_empty is none of inconclusive, failed, passed")
        answer = ask(document, environ)
    except MissingVariable as missing:
        return Measurement("inconclusive", None, str(missing))
    except Malformed as bad:
        return Measurement("inconclusive", None, measured.shortened(f"the measurement's document is unusable: {bad}"))
    outcome, why = measured.outcome(success, failure, on_empty, answer.result, empty=answer.empty, error=answer.error)
    return Measurement(outcome, measured.shown_value(answer.result), why)


def ask(document: Mapping[str, object], environ: Mapping[str, str]) -> ProviderAnswer:
    """The provider's answer; MissingVariable when a variable the template names is not set."""
    timeout = document.get("timeout", 30)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not timeout > 0:
        raise Malformed("timeout is not a positive number of seconds")
    provider = document.get("provider")
    if provider == "prometheus":
        address, named = where(_text(document, "address"), _text(document, "address_env"), "address", environ)
        query = _text(document, "query")
        if not query:
            raise Malformed("a prometheus template without a query")
        return prometheus.query(address, named, query, float(timeout))
    if provider == "http":
        url, named = where(_text(document, "url"), _text(document, "url_env"), "URL", environ)
        headers = dict(_texts(document, "headers"))
        headers.update({header: variable(name, environ) for header, name in _texts(document, "header_env").items()})
        method = _text(document, "method") or "GET"
        if method not in ("GET", "POST"):
            raise Malformed(f"method {method[:20]!r} is neither GET nor POST")
        return http.request(
            url,
            named,
            method=method,
            headers=headers,
            body=_text(document, "body"),
            json_path=_text(document, "json_path"),
            timeout=float(timeout),
        )
    if provider == "command":  # the controller runs a command template as the command itself
        return failed("a command template is run as its command, not by the measurement process")
    raise Malformed(f"provider {str(provider)[:40]!r} is not one of prometheus, http")


def _text(document: Mapping[str, object], key: str) -> str | None:
    value = document.get(key)
    if value is not None and not isinstance(value, str):
        raise Malformed(f"{key} is not text")
    return value


def _texts(document: Mapping[str, object], key: str) -> dict[str, str]:
    value = document.get(key) or {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise Malformed(f"{key} is not an object of texts")
    return value


def line(measurement: Measurement) -> str:
    """The line a human reads: `passed: value 0.004`, `inconclusive: value none: WHY`."""
    text = f"{measurement.outcome}: value {shown(measurement.value)}"
    return f"{text}: {measurement.error}" if measurement.error else text


def shown(value: Value) -> str:
    """A value as the human line writes it: numbers as Prometheus does (NaN, +Inf), text quoted, none."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    if isinstance(value, list):
        return "[" + ", ".join(shown(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)


def json_line(measurement: Measurement) -> str:
    """The last line, for the controller: strict JSON (NaN and the infinities as the text Prometheus uses)."""
    document = {"outcome": measurement.outcome, "value": _strict(measurement.value), "error": measurement.error}
    return json.dumps(document, allow_nan=False, ensure_ascii=False)


def _strict(value: Value) -> Value:
    if isinstance(value, float) and not math.isfinite(value):
        return shown(value)
    return [_strict(item) for item in value] if isinstance(value, list) else value


def main() -> int:
    """Run the measurement $ROLLOUT_ANALYSIS describes; print its two lines; its exit code."""
    try:
        document = json.loads(os.environ.get(DOCUMENT) or "null")
    except ValueError:
        document = None
    if isinstance(document, dict):
        measurement = measure(document, os.environ)
    else:
        measurement = Measurement("inconclusive", None, f"${DOCUMENT} does not hold a template as a JSON object")
    sys.stdout.write(f"{line(measurement)}\n{json_line(measurement)}\n")
    sys.stdout.flush()
    return EXIT_CODES[measurement.outcome]
