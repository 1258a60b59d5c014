"""Every deployment's phase, a byte each: what `audit` must remember of a deployment for as long as the log runs.

A config's deployments are numbered 1, 2, 3...: their phases sit in one bytearray per config, indexed by
revision, rather than in a dict of (config, revision) keys (~150 bytes a deployment, the audit's growth with
the log's length). A revision far past a config's last (a log edited to say revision 10**9) goes to a dict
instead: a number in the log never makes an array that long.
"""

from __future__ import annotations

from . import phases

_PHASES: tuple[str | None, ...] = (None, phases.NEW, phases.PENDING, phases.RUNNING, phases.COMPLETE, phases.FAILED)
_CODE = {phase: code for code, phase in enumerate(_PHASES)}
_REACH = 4096  # how far past a config's array a revision may be and still grow it


class PhaseTable:
    """get/set the phase of deployment (config, revision); None for one the table has not been told of."""

    def __init__(self) -> None:
        self._arrays: dict[str, bytearray] = {}
        self._far: dict[tuple[str, int], str] = {}  # revisions an array does not hold (negative, or far out)

    def get(self, config: str, revision: int) -> str | None:
        array = self._arrays.get(config)
        if array is not None and type(revision) is int and 0 <= revision < len(array) and array[revision]:
            return _PHASES[array[revision]]
        return self._far.get((config, revision)) if self._far else None  # (a revision set far, then the array grew)

    def set(self, config: str, revision: int, phase: str) -> None:
        array = self._arrays.get(config)
        if array is None:
            self._arrays[config] = array = bytearray()
        code = _CODE.get(phase)
        if code is None or type(revision) is not int or not 0 <= revision < len(array) + _REACH:
            self._far[config, revision] = phase
            return
        if revision >= len(array):
            array.extend(bytes(revision + 1 - len(array) + len(array) // 2))
        array[revision] = code

    def __len__(self) -> int:
        """How many deployments have a phase."""
        return sum(len(a) - a.count(0) for a in self._arrays.values()) + len(self._far)
