"""What shell completion reads: config and deployer names from the home's files (`_ROLLOUTS_COMPLETE`,
click's protocol; completion.py's callbacks load this module on the first Tab).

Completion runs on every Tab: it reads the home's files read-only, as they are (a view may lag
the log a little), never creates a home or a file, never takes a lock for long, and on any
problem offers nothing rather than print an error into the user's prompt.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import click
from click.shell_completion import CompletionItem

from ...projections.glance import configs_in_view, read_only
from ..home import DEFAULT_HOME, Home
from ..runtime.table import deployer_names
from ..service.bootstrap import Services, bootstrap
from ..store.port import Backend

_WAIT_S = 0.2  # a Tab must not hang behind a writer
REGISTERED = "domain.config:DeploymentConfig.Registered"  # the topic of a config's first event


def configs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Config names from the home's history view, and on the home's own SQLite log those
    registered since the view last caught up (a cheap range read of the log's newest rows)."""
    names, position = set[str](), 0
    with _quietly():
        names, position = configs_in_view(_home(ctx).projections, _WAIT_S)
    with _quietly():
        names |= _configs_logged_after(_services(ctx).backend, position)
    return [CompletionItem(name) for name in sorted(names) if name.startswith(incomplete)]


def _configs_logged_after(backend: Backend, position: int) -> set[str]:
    """Configs registered in the log since the view's position, where the log can tell at once."""
    return {json.loads(state).get("name") for state in backend.glance(position, REGISTERED, _WAIT_S)} - {None}


def deployers(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Deployer names from the home's runtime table, tombstones pruned by the history limit left out."""
    runtime = _home(ctx).runtime_db
    with _quietly():
        if runtime.is_file():
            with read_only(runtime, _WAIT_S) as db:
                return [CompletionItem(n) for n in deployer_names(db, incomplete) if n.startswith(incomplete)]
    return []


def _services(ctx: click.Context) -> Services:
    """The home and store the command line (or ROLLOUTS_HOME, ROLLOUTS_STORE) names, as the root group takes them."""
    params = ctx.find_root().params
    return bootstrap(Home(params.get("home") or DEFAULT_HOME), params.get("store"))


def _home(ctx: click.Context) -> Home:
    return Home(ctx.find_root().params.get("home") or DEFAULT_HOME)


@contextlib.contextmanager
def _quietly() -> Iterator[None]:
    """Whatever goes wrong (no home, a broken or locked file), completion offers nothing."""
    with contextlib.suppress(Exception):  # noqa: BLE001 - a Tab never prints an error
        yield
