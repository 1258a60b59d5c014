"""Projections rebuilt by a process of their own from a log it reads itself, SQLite or PostgreSQL (see build.build).

    echo '{"paths": {NAME: PATH}, "log": {"sqlite": [PATH, TABLE]}, ...}' | python -m rollouts.projections.build_worker

The task comes on stdin, not in argv, which anyone on the machine may read: a PostgreSQL log's
conninfo may hold a password. It writes their files as build does, prints the position it reached,
and exits 0; on an error it removes the files, prints one line on stderr and exits 1."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import cast

from .fold_files import fold_into_files, open_log
from .health import WorkerFailed, broke_a_file
from .registry import BY_NAME
from .source import EventSource, PostgresLog, SQLiteLog

BROKE_A_FILE = 3  # the worker's exit code when health.broke_a_file(its error)


class BuildWorker:
    """A running worker process."""

    def __init__(self, names: str, proc: subprocess.Popen[bytes]) -> None:
        self.names = names
        self.proc = proc

    def result(self) -> int:
        """The position the worker reached; WorkerFailed if it failed."""
        out, err = self.proc.communicate()
        if self.proc.returncode != 0:
            why = err.decode(errors="replace").strip().splitlines()
            broken = self.proc.returncode == BROKE_A_FILE
            raise WorkerFailed(f"rebuilding {self.names} failed: {why[-1] if why else self.proc.returncode}", broken)
        return int(out)

    def stop(self) -> None:
        """End the worker (it removes nothing: the caller removes its file)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate()


def start(
    paths: dict[str, Path], log: SQLiteLog | PostgresLog, head: int, log_id: str, batch: int, indexes: bool = True
) -> BuildWorker:
    """A worker folding the projections named in `paths` into new files there (without the indexes that
    enforce nothing unless `indexes`: see build.build)."""
    where = {"postgres": list(log)} if isinstance(log, PostgresLog) else {"sqlite": [str(log.path), log.table]}
    task = {
        "paths": {name: str(path) for name, path in paths.items()},
        "log": where,
        "head": head,
        "log_id": log_id,
        "batch": batch,
        "indexes": indexes,
    }
    # The worker imports this package from where this process found it.
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    argv = [sys.executable, "-m", "rollouts.projections.build_worker"]
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None  # a pipe, asked for above
    with proc.stdin:
        proc.stdin.write(json.dumps(task).encode())
    proc.stdin = None  # sent and closed: communicate() has nothing more to send
    return BuildWorker(", ".join(paths), proc)


def main(task_text: str) -> int:
    task = json.loads(task_text)
    where = task["log"]
    log = (
        PostgresLog(*where["postgres"])
        if "postgres" in where
        else SQLiteLog(Path(where["sqlite"][0]), *where["sqlite"][1:])
    )
    paths = {name: Path(path) for name, path in task["paths"].items()}
    chosen = [BY_NAME[name] for name in paths]
    try:
        reader = open_log(log)
        assert reader is not None  # a log was given: a reader of it
        try:
            # As the parent's rebuild pauses it (rebuild.paused_gc): this process ends with the build.
            gc.disable()
            # Its read() gives rows shaped as notifications (log_file.Row), all that a fold reads of a source.
            at = fold_into_files(
                cast(EventSource, reader),
                chosen,
                paths,
                task["head"],
                task["log_id"],
                task["batch"],
                None,
                log,
                task["indexes"],
            )
        finally:
            reader.close()
    except Exception as error:  # noqa: BLE001 - told to the parent in one line
        print(f"{type(error).__name__}: {' '.join(str(error).split())}", file=sys.stderr)
        return BROKE_A_FILE if broke_a_file(error) else 1
    print(at)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # SystemExit: _build removes its file
    sys.exit(main(sys.stdin.read()))
