"""`rollouts claim check`: whether a deployer's claim still holds (DESIGN 7.7, fencing).

No lease can stop a paused process from acting when it wakes; only the target can refuse it. A
deployer, hook or measurement gets `ROLLOUT_CLAIM=LOG_ID:POSITION` (the position of its attempt's
DeployerClaimed event) and asks before each side effect: the claim holds while it is its
deployment's latest claim, the deployment is still active with no cancel or abort asked, and its
claimant's lease has not expired by the database's clock.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import TYPE_CHECKING

from ...domain.errors import StoreProblem, UsageError
from ...domain.fencing import Verdict, claim_verdict
from ...domain.log_writers import writer_of
from ..home import DEFAULT_HOME
from ..store import claim_reads as reads
from ..store.url import parse_store
from .bootstrap import bootstrap
from .leases import lease_seconds

if TYPE_CHECKING:
    from ..store.port import Backend, Snapshot

_CLAIM = re.compile(r"([0-9a-f]{32}):([0-9]{1,18})")
CLAIMED = ".DeployerClaimed"
ORIGIN = "%LogOrigin.Origin"  # the topic of a log's Origin (domain.log.LogOrigin)


def parse(text: str) -> tuple[str, int]:
    """LOG_ID:POSITION, as ROLLOUT_CLAIM has it."""
    match = _CLAIM.fullmatch(text.strip())
    if not match:
        raise UsageError(f"claim {text[:80]!r} is not LOG_ID:POSITION (32 hex digits, a colon, a position)")
    return match[1], int(match[2])


def env_value(log_id: str, position: int) -> str:
    """ROLLOUT_CLAIM for the claim at `position` of log `log_id`."""
    return f"{log_id}:{position}"


def check(backend: Backend, claim: str) -> Verdict:
    """The claim's verdict, read in one snapshot of the log with a connection of its own: no application
    is opened, so a deployer can ask before each side effect (StoreUnavailable: the log is out of reach)."""
    log_id, position = parse(claim)
    with backend.snapshot() as look:
        found = reads.event_at(look, position)
        if found is None:
            return Verdict(False, f"the log holds no event at position {position}")
        stream, topic = found
        if not topic.endswith(CLAIMED):
            return Verdict(False, f"position {position} is not a claim ({topic.rpartition('.')[2]})")
        writer = _writer(look, position)
        if writer != log_id:
            return Verdict(False, f"the claim is of log {log_id}; position {position} here is of log {writer}")
        events = [(at, t.rpartition(".")[2], json.loads(state)) for at, t, state in reads.stream_events(look, stream)]
        leases = reads.live_leases(look, lease_seconds)
    return claim_verdict(position, events, lambda claimant: leases.get(claimant, False))


def _writer(look: Snapshot, position: int) -> str:
    """The id of the log that first wrote `position` (an imported or renamed log's first positions are its
    origin's: domain/log_writers)."""
    own = reads.own_log_id(look)
    origins = {}
    for state in reads.states_of(look, ORIGIN):
        data = json.loads(state)
        origins[data["log_id"]] = (data.get("source_log_id"), int(data["head"]))
    return writer_of(own, origins.get)(position)


def report(claim: str, verdict: Verdict, output: str) -> int:
    """Print the verdict as `claim check` does (`output`: table or json); its exit code."""
    if output == "json":  # (as adapters/documents.json_text renders it, without its imports)
        print(json.dumps({"claim": claim, "holds": verdict.holds, "why": verdict.why}, indent=2, default=str))
    else:
        print(f"{'ok' if verdict.holds else 'ended'}: {verdict.why}")
    return 0 if verdict.holds else 1


def answer(claim: str | None, output: str) -> int:
    """`rollouts claim check [CLAIM] [-o ...]` with no global option, as adapters/entry runs it before the
    command line loads: on $ROLLOUT_HOME and $ROLLOUT_STORE (else ROLLOUTS_HOME and ROLLOUTS_STORE, as
    the command line reads them). 0, 1, or 2 (usage) and 5 (no log) with one `error:` line."""
    claim = claim or os.environ.get("ROLLOUT_CLAIM")
    if not claim:
        return _error("give CLAIM (LOG_ID:POSITION) or run where ROLLOUT_CLAIM is set (in a deployer)", 2)
    home = os.environ.get("ROLLOUT_HOME") or os.environ.get("ROLLOUTS_HOME") or DEFAULT_HOME
    variable = "ROLLOUT_STORE" if os.environ.get("ROLLOUT_STORE") else "ROLLOUTS_STORE"
    store = os.environ.get(variable) or None
    try:
        verdict = check(bootstrap(home, parse_store(store, given_as=variable)).backend, claim)
    except UsageError as error:
        return _error(str(error), 2)
    except StoreProblem as error:
        return _error(str(error), 5)
    return report(claim, verdict, output)


def _error(message: str, code: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code
