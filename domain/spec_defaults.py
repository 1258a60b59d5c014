"""The defaults of the spec's fields of DESIGN 7.6 and 7.9: a spec that leaves them so stores none of them (plain
values, no pydantic: read commands show them without loading the validated Spec)."""

from typing import Any

STEP_DEFAULTS: dict[str, Any] = {
    "steps": None,
    "step_pause": 0,
    "verify": None,
    "verify_count": 3,
    "verify_interval": 10,
    "verify_timeout": 30,
    "failure_limit": 0,
    "inconclusive_limit": 0,
    "auto_rollback": False,
    "analysis": None,
    "analysis_args": None,
}
