"""What the providers share: a provider's answer, the variables a template names (read at measurement time,
never shown), and urllib3's failures told in the tool's own words, naming no address."""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import NamedTuple
from urllib.parse import unquote

from urllib3 import exceptions as x
from urllib3.util import make_headers, parse_url

from ...domain.condition import Value


class ProviderAnswer(NamedTuple):
    """What a provider said: its result, whether it was empty (no sample, no value at the path), and why it
    could not answer (None when it did)."""

    result: Value
    empty: bool = False
    error: str | None = None


def failed(error: str) -> ProviderAnswer:
    return ProviderAnswer(None, False, error)


class MissingVariable(Exception):
    """A variable a template names is not set (the measurement is inconclusive, naming it, never a value)."""


def variable(name: str, environ: Mapping[str, str]) -> str:
    """The value of the variable `name` (a secret: the caller never prints it); MissingVariable when unset or
    empty."""
    value = environ.get(name)
    if not value:
        raise MissingVariable(f"${name} is not set")
    return value


def where(given: str | None, env_name: str | None, what: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """(the address, how errors name it): `given` as it is ("the WHAT"), else the value of `env_name` ("the WHAT
    in $NAME"). Neither names the address itself: a URL may carry a token, and a variable's value is a secret."""
    if env_name:
        return variable(env_name, environ), f"the {what} in ${env_name}"
    if not given:
        raise MissingVariable(f"no {what} given")
    return given, f"the {what}"


def checked_url(url: str, named: str) -> str | None:
    """Why `url` cannot be asked (not http or https, no host), naming it only as `named`; None when it can."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest or rest[0] in "/?#":
        return f"{named} is not an http(s) URL with a host"
    return None


def credentials(url: str) -> dict[str, str]:
    """The Authorization header for the user and password a URL carries (`http://USER:PASSWORD@HOST`, most
    often from a variable): urllib3 sends none by itself. LocationParseError for a URL it cannot read."""
    auth = parse_url(url).auth
    if not auth:
        return {}
    user, _, password = auth.partition(":")
    return make_headers(basic_auth=f"{unquote(user)}:{unquote(password)}")


def unreachable(error: Exception, named: str, timeout: float) -> str:
    """A urllib3 failure as one line naming the address only as `named` (urllib3's own messages name the host,
    the port and the path)."""
    if isinstance(error, x.NameResolutionError):
        return f"cannot reach {named}: its host name does not resolve"
    if isinstance(error, x.NewConnectionError):  # (a subclass of ConnectTimeoutError: asked first)
        return f"cannot reach {named}: {_cause(error)}"
    if isinstance(error, x.TimeoutError):
        return f"no answer from {named} within the timeout of {timeout:g} s"
    if isinstance(error, x.SSLError):
        return f"cannot reach {named}: the TLS handshake failed"
    if isinstance(error, x.ProtocolError):
        return f"{named} broke the connection: {_cause(error)}"
    if isinstance(error, x.LocationValueError | x.LocationParseError):
        return f"{named} is not a usable URL"
    return f"cannot ask {named}: {type(error).__name__}"


def status_line(status: int) -> str:
    """A reply's status code and its standard phrase, and nothing of the reply itself (its text may hold
    anything, a token echoed back included)."""
    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def _cause(error: BaseException) -> str:
    """The operating system's words for what broke (an OSError's strerror), without any address."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror[0].lower() + seen.strerror[1:]
        seen = seen.__cause__ or seen.__context__
    return "connection failed"
