"""What every replay of views from zero uses: the fold into new files, with cycle collection paused.

The replays themselves (in place, in a shadow file, healing a broken file) are the store's
(`rollouts.projections.store`, `rollouts.projections.live`)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from .projection import Progress, Projection

if TYPE_CHECKING:
    from pathlib import Path

    from .source import EventSource


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cycle collection during a rebuild: it makes no cycles, and it keeps many objects alive
    (a batch of records, the folds' rows), which each collection would walk again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def build_into(
    source: EventSource,
    projections: Sequence[Projection],
    paths: dict[str, Path],
    head: int,
    log_id: str,
    progress: Progress | None = None,
) -> None:
    """Fold `projections` from zero to `head` into new files at `paths` (build.build, a rebuild's batches)."""
    from . import build  # rebuilds only: not on every read's import path

    build.build(source, projections, paths, head, log_id, build.REBUILD_BATCH, progress)
