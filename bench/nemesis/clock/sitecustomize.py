"""A stepped wall clock for every Python process of one nemesis host (bench/nemesis/run.py).

Loaded by `site` from PYTHONPATH when NEMESIS_CLOCK_FILE is set: time.time, time.time_ns,
datetime.now and datetime.utcnow read the real wall clock plus the offset (seconds) that file
holds, re-read at most every 50 ms. The monotonic and boot clocks are untouched, as a real step
leaves them; so are the kernel's (file times) and the database's. libfaketime cannot do this to
Python (DESIGN 9): it moves CLOCK_MONOTONIC too, or breaks time.sleep.
"""

from __future__ import annotations

import ctypes
import datetime as _datetime
import gc
import os
import time as _time

_PATH = os.environ.get("NEMESIS_CLOCK_FILE")
_real_time, _real_time_ns, _mono = _time.time, _time.time_ns, _time.monotonic
_state = [0.0, -1.0]  # offset, when read (monotonic)


def _offset() -> float:
    now = _mono()
    if now - _state[1] > 0.05:
        _state[1] = now
        try:
            with open(_PATH, "rb") as f:  # type: ignore[arg-type]
                _state[0] = float(f.read(64) or 0)
        except (OSError, ValueError):
            _state[0] = 0.0
    return _state[0]


def _install() -> None:
    real_now, real_utcnow = _datetime.datetime.now, _datetime.datetime.utcnow
    _time.time = lambda: _real_time() + _offset()
    _time.time_ns = lambda: _real_time_ns() + int(_offset() * 1e9)

    def now(cls: type, tz: _datetime.tzinfo | None = None) -> _datetime.datetime:
        return real_now(tz) + _datetime.timedelta(seconds=_offset())

    def utcnow(cls: type) -> _datetime.datetime:
        return real_utcnow() + _datetime.timedelta(seconds=_offset())

    # datetime is a C type whose methods cannot be set: its dict is changed in place, then the type told.
    slots = gc.get_referents(_datetime.datetime.__dict__)[0]
    slots["now"], slots["utcnow"] = classmethod(now), classmethod(utcnow)
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(_datetime.datetime))


if _PATH:
    _install()
