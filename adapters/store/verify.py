"""Checking a whole log's hash chain: in parallel parts where the store allows it, else in one walk."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from . import binding, chain
from .port import LogRecorder
from .sqlite.walk import PARALLEL_FROM, verify_part


def verify_log(
    recorder: LogRecorder, keep: int | None = None, workers: int | None = None, smallest: int | None = None
) -> chain.ChainVerdict:
    """Walk a chained recorder's log (log_recorder.py) from position zero.

    A long SQLite log is cut into one part per CPU, each walked by a process of its own from the
    hash stored before it: a break is reported where it is either way, and an intact log gives the
    same verdict as one walk. `workers` (default: the CPUs) and `smallest` (the fewest events worth
    the processes) are for tests and benchmarks.
    """

    parts = recorder.parts(workers or os.cpu_count() or 1, PARALLEL_FROM if smallest is None else smallest)
    if not parts:
        return chain.verify(recorder.chained_rows(), keep, fmt=recorder.chain_format())
    with ProcessPoolExecutor(len(parts), mp_context=multiprocessing.get_context("fork")) as pool:
        return chain.joined(list(pool.map(verify_part, parts, [keep] * len(parts))))


def seen_by_home(runtime: Path, recorder: LogRecorder) -> list[chain.Break]:
    """The head a home bound to this log has seen (its binding: position and hash), as a break when the
    log no longer holds it: a log replaced by another of the same id whose chain verifies on its own."""

    bound = binding.load(runtime) if runtime.is_dir() else None
    if bound is None:
        return []
    problem = bound.lost(recorder.log_id(), recorder.max_notification_id() or 0, recorder.hash_at)
    return [] if problem is None else [chain.Break(bound.seen, problem)]
