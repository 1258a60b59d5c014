#!/usr/bin/env python
"""Every performance figure in one run, at the path the docs name: `python bench/run.py [--quick] [--json]`.

The figures themselves are bench/performance/run.py's (this is the same command, kept where it always was).
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by path: the checkout's root on sys.path, where `bench` is, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.performance.run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
