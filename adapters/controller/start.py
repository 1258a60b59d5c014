"""A controller wired from a command's session: its runtime, its notifier, and the session's check before each pass."""

from __future__ import annotations

import os

from ..notify.notifier import Notifier
from ..runtime.local import LocalRuntime
from ..service.application import RolloutsApp
from ..service.leases import lease_seconds
from ..service.session import Session
from .loop import SQLITE_CACHE_KIB, Controller, Log, claimant_id, claimant_where


def runtime_for(session: Session) -> LocalRuntime:
    """The home's local runtime. Several hosts share a PostgreSQL log: shims then stop their deployer when
    our heartbeat is older than half a lease, before other hosts may end our claims (after a full lease)."""
    shared = session.backend.shared
    return LocalRuntime(
        session.home, heartbeat_max_age=lease_seconds() / 2 if shared else None, cache_kib=SQLITE_CACHE_KIB
    )


def controller_for(session: Session, log: Log, notify: bool) -> Controller:
    """The controller of `session`'s home on its log, with the home's runtime (the caller closes
    `controller.runtime`); with `notify`, it also sends to the sinks. Before each pass it asks the
    session whether the home is still bound to the log and the log not sealed."""
    session.cache_kib = SQLITE_CACHE_KIB
    app = session.app  # first: a home refused by its binding makes no runtime
    runtime = runtime_for(session)
    try:
        return _wired(session, app, runtime, log, notify)
    except BaseException:
        runtime.close()
        raise


def _wired(session: Session, app: RolloutsApp, runtime: LocalRuntime, log: Log, notify: bool) -> Controller:
    shared = session.backend.shared  # several hosts on one log: leases, heartbeats, a home per claimant
    notifier = None
    if notify:
        claimant = claimant_id(session.home)
        notifier = Notifier(session.services.open_app, session.meta, log, claimant, caller_app=app)
    return Controller(
        app,
        session.projections,
        runtime,
        claimant_id(session.home),
        session.actor,
        os.getcwd(),
        log,
        check_log=session.check_pass,
        notifier=notifier,
        where=claimant_where(session.home) if shared else None,  # one log a home: a copy has its own
        fence={
            "ROLLOUT_HOME": str(session.home.path.absolute()),
            "ROLLOUT_STORE": session.backend.store.for_deployers(),
        },
    )
