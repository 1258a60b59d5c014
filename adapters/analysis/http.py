"""The http provider (DESIGN 7.9): one request (GET or POST, headers, a body) and the value at a JSON path of
its reply as the result (the whole reply without a path); a non-2xx reply is named by its status alone."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Protocol

import urllib3
from urllib3 import HTTPHeaderDict

from ...domain.condition import Value
from .asking import ProviderAnswer, checked_url, credentials, failed, status_line, unreachable


class BadPath(ValueError):
    """A JSON path the library cannot parse."""


class _Match(Protocol):
    @property
    def value(self) -> object: ...


class _Finder(Protocol):
    """A parsed JSON path, as jsonpath-ng gives one."""

    def find(self, data: object) -> Sequence[_Match]: ...


def request(
    url: str,
    named: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    body: str | None = None,
    json_path: str | None = None,
    timeout: float,
) -> ProviderAnswer:
    """Send the request to `url` (named in errors only as `named`: a URL may carry a token) within `timeout`
    seconds; a non-2xx reply is an error that says its status and nothing of its text."""
    problem = checked_url(url, named)
    if problem is not None:
        return failed(problem)
    try:
        finder = compiled(json_path) if json_path is not None else None
    except BadPath as error:
        return failed(str(error))
    try:
        reply = urllib3.PoolManager().request(
            method,
            url,
            body=None if body is None else body.encode(),
            headers=_merged(credentials(url), headers or {}),
            timeout=urllib3.Timeout(total=timeout),
            retries=False,
        )
    except urllib3.exceptions.HTTPError as error:
        return failed(unreachable(error, named, timeout))
    if not 200 <= reply.status < 300:
        return failed(f"{named} answered {status_line(reply.status)}")
    try:
        document: object = json.loads(reply.data) if reply.data.strip() else None
    except ValueError:  # not JSON (or not UTF-8): the whole text is the result, a path finds nothing in it
        if finder is not None:
            return failed(f"{named} answered {status_line(reply.status)} with a reply that is not JSON")
        return ProviderAnswer(reply.data.decode("utf-8", "replace"))
    if finder is None:
        return ProviderAnswer(plain(document))
    found = [plain(match.value) for match in finder.find(document)]
    found = [value for value in found if value is not None]
    if not found:
        return ProviderAnswer(None, empty=True)
    return ProviderAnswer(found[0] if len(found) == 1 else found)


def _merged(first: Mapping[str, str], then: Mapping[str, str]) -> HTTPHeaderDict:
    """`first` with `then`'s headers over it, names compared as HTTP does (without case): a header the template
    gives wins over the URL's credentials."""
    merged = HTTPHeaderDict(first)
    for name, value in then.items():
        merged[name] = value
    return merged


def compiled(json_path: str) -> _Finder:
    """`json_path` parsed by jsonpath-ng (its extended grammar: filters and arithmetic); BadPath if it is not
    a JSON path. `analysis create|set` can check a path with it before it is stored."""
    from jsonpath_ng.ext.parser import parse  # start-up cost: the parser's tables load for a path alone

    try:
        finder: _Finder = parse(json_path)
    except Exception as error:  # noqa: BLE001 - besides its own errors the parser raises what its lexer meets
        raise BadPath(f"{json_path[:80]!r} is not a JSON path: {str(error)[:120]}") from None
    return finder


def plain(value: object) -> Value:
    """A JSON value as a condition reads it: an object becomes its JSON text (conditions have no objects)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [plain(item) for item in value]
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
