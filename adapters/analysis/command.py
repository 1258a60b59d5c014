"""A command template measured by hand (`rollouts measure`): the command run as a process of its own, with no
shell and the template's timeout, and its exit read by the rule of DESIGN 7.6 (0 passed, 1 failed, anything
else inconclusive). The controller runs a command template as a measurement process itself."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence

from ...domain.measured import Outcome, shortened


def run(argv: Sequence[str], timeout: float, environ: Mapping[str, str]) -> tuple[Outcome, str | None]:
    """The command's outcome and why it is inconclusive; its output goes where this process's goes."""
    try:
        process = subprocess.Popen(list(argv), env=dict(environ), stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as error:
        return "inconclusive", shortened(f"cannot run {argv[0]}: {error.strerror or type(error).__name__}")
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(process)
        return "inconclusive", f"timed out after {timeout:g} s"
    if code == 0:
        return "passed", None
    if code == 1:
        return "failed", None
    if code < 0:
        return "inconclusive", f"ended by signal {-code}"
    return "inconclusive", f"exit code {code}"


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the command and whatever it started (its own session: one process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
