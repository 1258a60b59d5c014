"""The chaos run's faults (bench/chaos/run.py): controllers killed and restarted, shims killed, views corrupted,
old copies of the views and of the log restored."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from concurrent.futures import Future, wait

from bench.chaos import notify as chaos_notify  # bench/chaos/notify.py: the notification sink of the run
from bench.chaos.model import Controller, Op, Verdict, tail
from rollouts.adapters.runtime.procs import is_alive


class Faults:
    """The faults a chaos run injects (a part of chaos.Chaos)."""

    def start_controller(self, c: Controller) -> None:
        c.generation += 1
        c.log = self.logs / f"controller-{c.slot}-{c.generation}.log"
        actor = f"chaos-controller-{c.slot}"
        argv = ["--as", actor, "controller", "run", "--interval", "0.05", "-q"]
        with open(c.log, "wb") as log:
            assert self.commands is not None
            c.proc = self.commands.spawn(argv, log.fileno(), log.fileno())
        c.killed = False

    def kill_controller(self, c: Controller, *, delay: float) -> bool:
        if c.proc is None or c.proc.poll() is not None:
            return False
        c.killed = True
        c.proc.send_signal(signal.SIGKILL)
        c.proc.wait()
        c.proc = None
        c.down_until = time.monotonic() + delay
        self.counts["controller_kills"] += 1
        return True

    def maintain_controllers(self, verdict: Verdict) -> None:
        """Restart controllers that were killed (after their delay) or that died by themselves."""
        now = time.monotonic()
        for c in self.controllers:
            if c.proc is not None and c.proc.poll() is not None:
                verdict.add(
                    "controller_crashes",
                    {"slot": c.slot, "generation": c.generation, "rc": c.proc.returncode, "log": tail(c.log)},  # type: ignore[arg-type]
                )
                c.proc = None
            if c.proc is None and now >= c.down_until:
                self.start_controller(c)

    def stop_controllers(self, *, kill: bool) -> None:
        for c in self.controllers:
            if c.proc is None:
                continue
            if kill:
                self.kill_controller(c, delay=0)
                continue
            c.proc.send_signal(signal.SIGTERM)
        for c in self.controllers:
            if c.proc is None:
                continue
            try:
                c.proc.wait(30)
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait()
            c.proc = None

    def runtime_rows(self, where: str = "") -> list[sqlite3.Row]:
        db_path = self.home / "runtime" / "runtime.db"
        if not db_path.exists():
            return []
        try:
            db = sqlite3.connect(db_path, timeout=30)
        except sqlite3.Error:
            return []
        try:
            db.row_factory = sqlite3.Row
            return db.execute(f"SELECT * FROM deployers {where} ORDER BY name").fetchall()
        except sqlite3.Error:
            return []
        finally:
            db.close()

    def kill_shim(self, pick: float) -> bool:
        rows = [
            r
            for r in self.runtime_rows("WHERE state IN ('created', 'running') AND shim_pid IS NOT NULL")
            if is_alive(r["shim_pid"], r["shim_start"])
        ]
        if not rows:
            return False
        row = rows[int(pick * len(rows))]
        if not is_alive(row["shim_pid"], row["shim_start"]):  # verified again just before the kill
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(row["shim_pid"], signal.SIGKILL)
            self.counts["shim_kills"] += 1
            self.log(f"SIGKILL shim {row['shim_pid']} of {row['name']}")
            return True
        return False

    def corrupt_view(self, pick: float) -> bool:
        """Random bytes or zero length in place over a projection file (a view or the catalog)."""
        files = sorted((self.home / "projections").glob("*.db"))
        if not files:
            return False
        path = files[int(pick * len(files))]
        how = "zero length" if self.rng.random() < 0.5 else "random bytes"
        try:
            with open(path, "r+b") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(0)
                if how == "zero length":
                    f.truncate(0)
                else:
                    f.write(self.rng.randbytes(max(size, 4096)))
        except FileNotFoundError:  # swapped out by a rebuild meanwhile
            return False
        self.counts["corruptions"] += 1
        self.log(f"{how} over {path.name}")
        return True

    def quiesce(self, inflight: set[Future[Op]]) -> None:
        wait(inflight)
        inflight.clear()
        self.stop_controllers(kill=True)

    def take_backup(self) -> None:
        shutil.rmtree(self.backup, ignore_errors=True)
        shutil.copytree(self.home / "projections", self.backup)
        self.counts["backups"] += 1
        self.log(f"projections copied to {self.backup}")
        if self.args.restore_log and self.log_mark is None:
            with (
                contextlib.closing(sqlite3.connect(self.home / "events.db")) as source,
                contextlib.closing(sqlite3.connect(self.log_backup)) as target,
            ):
                source.backup(target)
            latest = {c.name: c.latest_known for c in self.configs}
            self.log_mark = {"ops": len(self.ops), "gt": self.gt_lines(), "latest": latest}
            self.log("log copied")

    def gt_lines(self) -> int:
        return len(self.gt.read_text().splitlines()) if self.gt.exists() else 0

    def restore_log(self) -> None:
        """Put the old copy of the log back: refused until `home rebind`, then that history is gone."""
        assert self.log_mark is not None
        # Through SQLite's backup API, as an operator restoring a live WAL database must: copying the
        # file over it races the WAL of any connection still open (its checkpoint brings the old pages back).
        with (
            contextlib.closing(sqlite3.connect(self.log_backup)) as source,
            contextlib.closing(sqlite3.connect(self.home / "events.db")) as target,
        ):
            source.backup(target)
        self.sink_restored_at = chaos_notify.received_count(self.sink)
        self.counts["log_restores"] += 1
        self.counts["freeze_kept"] = 0  # the freezes issued since the copy are gone with it
        for args in (["rollout", "latest", self.configs[0].name], ["controller", "run", "--once", "-q"]):
            rc, _, err = self.cli(args, actor="chaos-after-restore")
            if rc != 5:
                self.verdict.add("restore_not_refused", {"args": args, "rc": rc, "err": err.strip()[-300:]})
        rc, out, err = self.cli(["home", "rebind", "--yes"], actor="chaos-rebind")
        if rc != 0:
            self.verdict.add("rebind", {"rc": rc, "err": err.strip()[-300:]})
        self.gone_runs = (self.log_mark["gt"], self.gt_lines())
        self.ops = self.ops[: self.log_mark["ops"]]
        for conf in self.configs:
            conf.latest_known = self.log_mark["latest"].get(conf.name, 0)
        self.log(f"old log copied back and the home rebound: {out.strip()}")

    def restore_backup(self) -> None:
        if self.log_mark is not None and not self.counts["log_restores"]:
            self.restore_log()
            return
        folder = self.home / "projections"
        for path in folder.iterdir():
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        for path in self.backup.iterdir():
            shutil.copy2(path, folder / path.name)
        self.counts["restores"] += 1
        self.log("old projections copied back")

    def chaos_inline(self, op: Op) -> None:
        if op.kind == "kill_controller":
            c = self.controllers[int(op.pick * len(self.controllers))]
            if self.kill_controller(c, delay=op.pick * 1.0):
                self.log(f"SIGKILL controller {c.slot}")
                op.rc = 0
        elif op.kind == "kill_shim":
            op.rc = 0 if self.kill_shim(op.pick) else None
        elif op.kind == "corrupt_view":
            op.rc = 0 if self.corrupt_view(op.pick) else None
        self.record(op)
