"""Starting a module of this package in an interpreter of its own: isolated (-I), without site (-S)."""

from __future__ import annotations

import sys
from pathlib import Path

# The folder of the `rollouts` package (the repo's top level, or site-packages/rollouts).
# `python -I -S -m MODULE` cannot find it: -I leaves out PYTHONPATH and the working directory
# (a deployer's folder may hold any `rollouts`), and -S leaves out site, where an installed or
# editable package is found; site would also cost every shim twice its start. The folder's
# name need not be `rollouts` (a clone is named as its owner likes), so the child makes the
# package from the folder itself, then runs MODULE as -m would.
ROOT = str(Path(__file__).resolve().parents[2])
_RUN_MODULE = (
    "import importlib.util as u, runpy, sys; root, module = sys.argv[1:3]; del sys.argv[1:3];"
    " s = u.spec_from_file_location('rollouts', root + '/__init__.py', submodule_search_locations=[root]);"
    " p = sys.modules['rollouts'] = u.module_from_spec(s); s.loader.exec_module(p);"
    " runpy.run_module(module, run_name='__main__', alter_sys=True)"
)


def module_argv(module: str, *args: str) -> list[str]:
    """The argv that runs `python -m MODULE ARGS...` (sys.argv[1:] == ARGS) cheaply and isolated."""
    return [sys.executable, "-I", "-S", "-c", _RUN_MODULE, ROOT, module, *args]
