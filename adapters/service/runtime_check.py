"""What a home's runtime started, held to what the log calls for (I8, for `audit`).

Someone who can write the store can change an event, let a controller act on it, and put the event
back: the chain then holds again, and every view folds to the event as it was. The runtime keeps
what it started (argv, the env stored for it, the names passed from the controller's environment),
in the home, out of the store's reach: a run the log's spec does not account for is that change's
trace. Rows of another log, rows from before claims were recorded and pruned rows (no argv) are
not compared.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ...domain.audit import Violation
from ...domain.spec import Spec
from ...projections.history_queries import step_run
from ..runtime.port import claim_parts
from ..runtime.table import recorded_runs
from .launch import TEMPLATE_NAME_ENV, command_of, inherited
from .template_check import template_differs

if TYPE_CHECKING:
    import sqlite_utils


def runtime_breaks(
    runtime: Path, log_id: str | None, history: sqlite_utils.Database, audit: sqlite_utils.Database
) -> list[Violation]:
    """The runs of `runtime` (a home's runtime folder) made for claims of log `log_id` whose argv,
    env or passed names differ from what the spec of their deployment, as `history` (the log's fold
    of the history view) holds it, says, or (a template's measurement) from the template at the revision
    its attempt's claim fixed, as `audit` (the audit view) holds them: as `audit` violations."""
    path = runtime / "runtime.db"
    if log_id is None or not path.is_file():
        return []
    rows = recorded_runs(path)
    found = []
    for name, config, revision, argv, env, pass_env, claim in rows:
        parts = claim_parts(claim)
        if parts is None or parts[0] != log_id:
            continue
        run = step_run(history, name)
        if run is None:  # a run this log's fold does not name: the claim check (I7) is what keeps it out
            continue
        stored = json.loads(env) if env is not None else {}
        if TEMPLATE_NAME_ENV in stored:  # a template's measurement (DESIGN 7.9)
            problem = template_differs(audit, run[0], name, json.loads(argv), stored, pass_env)
        else:
            problem = _differs(run[0], run[1], name, argv, env, pass_env)
        if problem is not None:
            found.append(Violation(parts[1], config, revision, "I8", problem))
    return found


def _differs(spec_text: str, kind: str, name: str, argv: str, env: str | None, pass_env: str | None) -> str | None:
    """Why the run `name` is not what `spec_text` calls for, if it is not."""
    try:
        spec = Spec.model_validate(json.loads(spec_text))
        wanted = command_of(spec, kind, name)
    except ValueError:  # (pydantic's errors are ValueErrors) a spec the controller could not have run
        return None
    trace = "an event it was started from was changed in the store, and put back"
    ran = json.loads(argv)
    if ran != wanted:
        return f"{name} ran {json.dumps(ran)} where the log's spec says {json.dumps(wanted)}: {trace}"
    odd = []
    if env is not None:  # (None: a row from before pass_env, its env forgotten)
        stored = json.loads(env)
        # Besides its spec's env, a run gets PWD (the controller's directory, unless the spec sets it) and
        # ROLLOUT_* (which spec.py refuses in a spec's env): launch.launch_spec, the executor
        same = {k for k, v in stored.items() if spec.env.get(k) == v or k == "PWD" or k.startswith("ROLLOUT_")}
        odd += sorted({*spec.env, *stored} - same)
    passed = json.loads(pass_env) if pass_env else []
    odd += sorted(n for n in passed if n not in spec.pass_env and not inherited([n]))
    if odd:
        return f"{name} ran with {', '.join(odd)} set otherwise than the log's spec says: {trace}"
    return None
