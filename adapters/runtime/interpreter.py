"""Starting a module of this package in an interpreter of its own: isolated (-I), without site (-S)."""

from __future__ import annotations

import sys
from pathlib import Path

# The folder that holds the `adapters` package. `python -I -S -m MODULE` cannot find it: -I
# leaves out PYTHONPATH and the working directory (a deployer's folder may hold any `adapters`),
# and -S leaves out site, where an installed package is found; site would also cost every shim
# twice its start. So the child puts this folder first itself, then runs MODULE as -m would.
ROOT = str(Path(__file__).resolve().parents[2])
_RUN_MODULE = (
    "import runpy, sys; root, module = sys.argv[1:3]; del sys.argv[1:3]; sys.path.insert(0, root);"
    " runpy.run_module(module, run_name='__main__', alter_sys=True)"
)


def module_argv(module: str, *args: str) -> list[str]:
    """The argv that runs `python -m MODULE ARGS...` (sys.argv[1:] == ARGS) cheaply and isolated."""
    return [sys.executable, "-I", "-S", "-c", _RUN_MODULE, ROOT, module, *args]
