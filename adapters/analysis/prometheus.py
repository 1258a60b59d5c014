"""The prometheus provider (DESIGN 7.9): an instant query, `GET ADDRESS/api/v1/query?query=Q`, and its reply
as a result: a number for a scalar or a vector of one sample, a list of numbers for several, empty for none."""

from __future__ import annotations

import json
from collections.abc import Mapping
from urllib.parse import urlencode

import urllib3

from ...domain.condition import Value
from .asking import ProviderAnswer, checked_url, credentials, failed, status_line, unreachable

PATH = "/api/v1/query"


def query(address: str, named: str, promql: str, timeout: float) -> ProviderAnswer:
    """Ask the Prometheus server at `address` (named in errors only as `named`) for `promql` at this instant,
    within `timeout` seconds; a query error, a non-2xx reply, an unreachable server or a timeout is an error."""
    problem = checked_url(address, named)
    if problem is not None:
        return failed(problem)
    url = f"{address.rstrip('/')}{PATH}?{urlencode({'query': promql})}"
    try:
        headers = {"Accept": "application/json", **credentials(address)}
        reply = urllib3.PoolManager().request(
            "GET", url, timeout=urllib3.Timeout(total=timeout), retries=False, headers=headers
        )
    except urllib3.exceptions.HTTPError as error:
        return failed(unreachable(error, named, timeout))
    try:
        document = json.loads(reply.data)
    except ValueError:  # (UnicodeDecodeError included)
        document = None
    if isinstance(document, dict) and document.get("status") == "error":  # Prometheus says why, with a 4xx or 5xx
        return failed(f"the query failed: {document.get('errorType', 'error')}: {document.get('error', '')}")
    if not 200 <= reply.status < 300:
        return failed(f"{named} answered {status_line(reply.status)}")
    data = document.get("data") if isinstance(document, dict) and document.get("status") == "success" else None
    if not isinstance(data, Mapping):
        return failed(f"{named} did not answer as Prometheus's query API does")
    return answer_of(data)


def answer_of(data: Mapping[str, object]) -> ProviderAnswer:
    """The result of a successful query's `data`: its resultType says how to read its `result`."""
    kind, result = data.get("resultType"), data.get("result")
    try:
        if kind == "scalar" and isinstance(result, list):
            return ProviderAnswer(number(result[1]))
        if kind == "string" and isinstance(result, list):
            return ProviderAnswer(str(result[1]))
        if kind == "vector" and isinstance(result, list):
            values = [number(sample["value"][1]) for sample in result]
            if not values:
                return ProviderAnswer(None, empty=True)
            return ProviderAnswer(values[0] if len(values) == 1 else list(values))
    except (LookupError, TypeError, ValueError):
        return failed(f"the query's {kind} result is not as Prometheus writes one")
    if kind == "matrix":
        return failed("the query gives a range vector (a matrix): ask for an instant vector or a scalar")
    return failed(f"the query's result type {str(kind)[:40]!r} is not one this provider reads")


def number(text: object) -> Value:
    """A sample's value as Prometheus writes it ("0.004", "NaN", "+Inf"): a float, or an int when whole."""
    if not isinstance(text, str):
        raise TypeError("a sample's value is a string")
    value = float(text)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value
