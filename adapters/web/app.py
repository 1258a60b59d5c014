"""The WSGI application of `rollouts serve`: the routes (pages, JSON API, /metrics) behind middleware that every
request passes: read-only methods, bounded targets and headers, the Host check, the bearer token, ETags
(304 when nothing changed) and the security headers."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable
from pathlib import Path
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from . import routes

Answer = Callable[[str], routes.Response]  # the response to GET of a target (path and query)
Middleware = Callable[[WSGIApplication], WSGIApplication]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SECURITY_HEADERS = (
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; form-action 'self'",
    ),
)
MAX_TARGET = 8192  # bytes of a request's path and query (414 past it), as servers commonly allow
MAX_HEADERS = 100  # header fields of a request (431 past it), as the standard library's server allowed
STATIC_FILES = Path(__file__).parent / "static"  # package data: the page's style and its script
STATIC = {
    "/static/page.css": "text/css; charset=utf-8",
    "/static/live.js": "text/javascript; charset=utf-8",
}
TEXT = "text/plain; charset=utf-8"
UNAUTHORIZED = routes.Response(
    401, TEXT, b"a bearer token is needed\n", (("WWW-Authenticate", 'Bearer realm="rollouts"'),)
)
MISDIRECTED = routes.Response(421, TEXT, b"this server answers only to localhost\n")
READ_ONLY = routes.Response(405, TEXT, b"read-only: GET and HEAD only\n", (("Allow", "GET, HEAD"),))
TOO_LONG = routes.Response(414, TEXT, b"the request's path and query are too long\n")
TOO_MANY = routes.Response(431, TEXT, b"too many header fields\n")
STATUS = {200: "OK", 304: "Not Modified", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found"}
STATUS |= {
    405: "Method Not Allowed",
    414: "URI Too Long",
    421: "Misdirected Request",
    431: "Request Header Fields Too Large",
}
STATUS |= {500: "Internal Server Error", 503: "Service Unavailable"}


def application(answer: Answer, loopback: bool, token: bytes | None) -> WSGIApplication:
    """The whole application: `answer` (the reader's, under its lock) behind every check, outermost first."""
    layers: list[Middleware] = [security_headers, read_only, bounded]
    if loopback:
        layers.append(host_check)
    if token is not None:
        layers.append(bearer(token))
    app = entity_tags(routed(answer))
    for layer in reversed(layers):
        app = layer(app)
    return app


def send(response: routes.Response, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
    """`response` as WSGI sends it: its length always, its body unless asked with HEAD."""
    status = f"{response.status} {STATUS.get(response.status, 'Unknown')}"
    headers = [("Content-Type", response.content_type), *response.headers]
    if response.status != 304:
        headers.append(("Content-Length", str(len(response.body))))
    start_response(status, headers)
    return [] if environ.get("REQUEST_METHOD") == "HEAD" or response.status == 304 else [response.body]


def routed(answer: Answer) -> WSGIApplication:
    """The routes: the page's style and script from the package, everything else from the views."""

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        target = environ.get("REQUEST_URI") or environ.get("PATH_INFO", "/")  # as sent: nothing unquoted
        static = STATIC.get(target)
        if static is not None:
            return send(
                routes.Response(200, static, (STATIC_FILES / target.rsplit("/", 1)[1]).read_bytes()),
                environ,
                start_response,
            )
        return send(answer(target), environ, start_response)

    return app


def entity_tags(app: WSGIApplication) -> WSGIApplication:
    """An ETag on every 200 (a digest of its body), and 304 for a request whose If-None-Match names it: a page
    that polls the API for what changed is answered in a few bytes while nothing has."""

    def tagged(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        kept: list[tuple[str, list[tuple[str, str]]]] = []

        def keep(status: str, headers: list[tuple[str, str]], exc_info: object = None) -> Callable[[bytes], object]:
            kept.append((status, headers))
            return _no_write

        body = b"".join(app(environ, keep))
        status, headers = kept[0]
        if not status.startswith("200 "):
            start_response(status, headers)
            return [body]
        tag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
        asked = {t.strip() for t in environ.get("HTTP_IF_NONE_MATCH", "").split(",")}
        if tag in asked or "*" in asked:
            start_response("304 Not Modified", [("ETag", tag)])
            return []
        start_response(status, [*headers, ("ETag", tag)])
        return [body]

    return tagged


def _no_write(data: bytes) -> None:
    raise RuntimeError("the routes return their body; they never write")


def security_headers(app: WSGIApplication) -> WSGIApplication:
    def secured(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], exc_info: object = None) -> Callable[[bytes], object]:
            return start_response(status, [*headers, *SECURITY_HEADERS])

        return app(environ, start)

    return secured


def read_only(app: WSGIApplication) -> WSGIApplication:
    def only_reads(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return send(READ_ONLY, environ, start_response)
        return app(environ, start_response)

    return only_reads


def bounded(app: WSGIApplication) -> WSGIApplication:
    """A target past MAX_TARGET is 414, more than MAX_HEADERS fields 431 (the server bounds the header's bytes)."""

    def within(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if len(environ.get("REQUEST_URI", "")) > MAX_TARGET:
            return send(TOO_LONG, environ, start_response)
        if sum(1 for key in environ if key.startswith("HTTP_")) > MAX_HEADERS:
            return send(TOO_MANY, environ, start_response)
        return app(environ, start_response)

    return within


def host_check(app: WSGIApplication) -> WSGIApplication:
    """On loopback, a request must name a loopback host: a page on another site whose name resolves to
    127.0.0.1 (DNS rebinding) reads nothing."""

    def local(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if not is_loopback_host(environ.get("HTTP_HOST", "")):
            return send(MISDIRECTED, environ, start_response)
        return app(environ, start_response)

    return local


def bearer(token: bytes) -> Middleware:
    def middleware(app: WSGIApplication) -> WSGIApplication:
        def checked(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
            if not authorized(environ.get("HTTP_AUTHORIZATION"), token):
                return send(UNAUTHORIZED, environ, start_response)
            return app(environ, start_response)

        return checked

    return middleware


def authorized(header: str | None, token: bytes) -> bool:
    """Whether an Authorization header carries the bearer token (compared in constant time)."""
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token)


def is_loopback_host(header: str) -> bool:
    host = header.strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":")[0]
    return host in LOOPBACK_NAMES
