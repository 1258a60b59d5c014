"""What a CLI test asks of a command's result: it succeeded without a traceback, and its JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.conftest import Result


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result
    assert "Traceback" not in result.stderr, result
    return result


def as_json(result: Result) -> Any:
    return json.loads(ok(result).stdout)
