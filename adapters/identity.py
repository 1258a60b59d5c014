"""Who really acts: the OS account of this process's real uid as the initial user namespace sees it, at
this host (not USER or LOGNAME); none inside any other user namespace, where uid 0 costs nothing."""

from __future__ import annotations

import functools
import os
import pwd
import uuid
from typing import Any

UID_MAP = "/proc/self/uid_map"
INITIAL_MAP = ["0", "0", "4294967295"]  # the initial user namespace maps every uid to itself


def in_initial_user_namespace(uid_map: str = UID_MAP) -> bool:
    """Whether this process's uids are the host's own. Comparing /proc/self/ns/user with /proc/1/ns/user
    is not enough: in a container pid 1 shares the container's namespace. A system with no uid_map (not
    Linux, or no user namespaces) has only the initial one."""
    try:
        with open(uid_map) as f:
            lines = [line.split() for line in f.read().splitlines() if line.strip()]
    except FileNotFoundError:
        return True
    return lines == [INITIAL_MAP]


@functools.cache
def os_user() -> str | None:
    """`ACCOUNT@HOST` (the uid itself when the account has no name, in some containers); None inside a
    user namespace other than the initial one (`unshare -r`), where any account can be uid 0 and any
    host name can be set: nothing there proves who ran the command."""
    if not in_initial_user_namespace():
        return None
    uid = os.getuid()
    try:
        account = pwd.getpwuid(uid).pw_name
    except KeyError:
        account = str(uid)
    return f"{account}@{os.uname().nodename}"


def new_meta(actor: str, db_user: str | None = None, **extra: object) -> dict[str, Any]:
    """An event's metadata: `actor` is what --as says; `os_user` who ran the command, whatever it says
    (null from inside a user namespace); `db_user` the database role the store's server knows the writer
    as (PostgreSQL, which checks it)."""

    meta = {"actor": actor, "os_user": os_user(), "correlation_id": uuid.uuid4().hex, **extra}
    return meta if db_user is None else {**meta, "db_user": db_user}
