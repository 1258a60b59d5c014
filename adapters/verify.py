"""Checking a whole log's hash chain: in parallel parts where the store allows it, else in one walk."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from adapters import chain


def verify_log(
    recorder: Any, keep: int | None = None, workers: int | None = None, smallest: int | None = None
) -> chain.Verdict:
    """Walk a chained recorder's log (adapters.recorders) from position zero.

    A long SQLite log is cut into one part per CPU, each walked by a process of its own from the
    hash stored before it: a break is reported where it is either way, and an intact log gives the
    same verdict as one walk. `workers` (default: the CPUs) and `smallest` (the fewest events worth
    the processes) are for tests and benchmarks.
    """
    from adapters.recorders import PARALLEL_FROM, verify_part

    parts = recorder.parts(workers or os.cpu_count() or 1, PARALLEL_FROM if smallest is None else smallest)
    if not parts:
        return chain.verify(recorder.chained_rows(), keep)
    with ProcessPoolExecutor(len(parts), mp_context=multiprocessing.get_context("fork")) as pool:
        return chain.joined(list(pool.map(verify_part, parts, [keep] * len(parts))))
