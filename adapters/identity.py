"""Who really acts: the OS account of this process's real uid, at this host (not USER or LOGNAME)."""

from __future__ import annotations

import functools
import os
import pwd
import socket
import uuid
from typing import Any


@functools.cache
def os_user() -> str:
    """`ACCOUNT@HOST`; the uid itself when the account has no name (some containers)."""
    uid = os.getuid()
    try:
        account = pwd.getpwuid(uid).pw_name
    except KeyError:
        account = str(uid)
    return f"{account}@{socket.gethostname()}"


def new_meta(actor: str, db_user: str | None = None, **extra: Any) -> dict[str, Any]:
    """An event's metadata: `actor` is what --as says; `os_user` who ran the command, whatever it says;
    `db_user` the database role the store's server knows the writer as (PostgreSQL, which checks it)."""

    meta = {"actor": actor, "os_user": os_user(), "correlation_id": uuid.uuid4().hex, **extra}
    return meta if db_user is None else {**meta, "db_user": db_user}
