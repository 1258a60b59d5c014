"""Projections rebuilt from a local SQLite log by a process of their own (see build.build).

    python -m projections.build_worker '{"paths": {NAME: PATH, ...}, "log": ..., "table": ..., ...}'

It writes their files as build does, prints the position it reached, and exits 0; on an error it
removes the files, prints one line on stderr and exits 1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from projections.source import SQLiteLog


class WorkerFailed(RuntimeError):
    """A rebuild's worker process failed (its message says why)."""


class Worker:
    """A running worker process."""

    def __init__(self, names: str, proc: subprocess.Popen[bytes]) -> None:
        self.names = names
        self.proc = proc

    def result(self) -> int:
        """The position the worker reached; WorkerFailed if it failed."""
        out, err = self.proc.communicate()
        if self.proc.returncode != 0:
            why = err.decode(errors="replace").strip().splitlines()
            raise WorkerFailed(f"rebuilding {self.names} failed: {why[-1] if why else self.proc.returncode}")
        return int(out)

    def stop(self) -> None:
        """End the worker (it removes nothing: the caller removes its file)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate()


def start(paths: dict[str, Path], log: SQLiteLog, head: int, log_id: str, batch: int) -> Worker:
    task = {
        "paths": {name: str(path) for name, path in paths.items()},
        "log": str(log.path),
        "table": log.table,
        "head": head,
        "log_id": log_id,
        "batch": batch,
    }
    # The worker imports this package from where this process found it.
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    argv = [sys.executable, "-m", "projections.build_worker", json.dumps(task)]
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return Worker(", ".join(paths), proc)


def main(argv: list[str]) -> int:
    from projections import build
    from projections.log_file import LogFile
    from projections.registry import BY_NAME

    task = json.loads(argv[0])
    log = SQLiteLog(Path(task["log"]), task["table"])
    paths = {name: Path(path) for name, path in task["paths"].items()}
    chosen = [BY_NAME[name] for name in paths]
    source = LogFile(log)
    try:
        at = build._build(source, chosen, paths, task["head"], task["log_id"], task["batch"], None, log)
    except Exception as error:  # noqa: BLE001 - told to the parent in one line
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 1
    finally:
        source.close()
    print(at)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # SystemExit: _build removes its file
    sys.exit(main(sys.argv[1:]))
