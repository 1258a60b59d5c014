"""The chaos run's moves (bench/chaos/run.py --moves N): the log sealed, imported into a fresh store, and the
old controllers left running against the sealed source, which must refuse them.

A move, while controllers run and no command is in flight: `freeze --all` (no new claim), `log export
--seal` until no deployment is Pending or Running any more, then on the sealed source a write and a
late `controller run --once` (each must exit 1 naming the seal) while the old controllers go on until
they stop by themselves (exit 1, naming the seal: `sealed_not_refused` counts every refusal that did not
happen), `log import` of the export into a fresh store with a home of its own (a new schema with
--store), and the run goes on there: new controllers, `unfreeze --all`. What the checks need of the
old homes is kept: their deployers (a step killed there stays alive until its ended_at there), the
log ids (a notification's key names the log that sent it) and where in the sink's requests each
move happened.
"""

from __future__ import annotations

import time
from typing import Any

from bench.chaos.model import Verdict, tail
from bench.shared.cli_server import ForkedCli, FreshCli

SEAL_WAIT = 120.0  # seconds a move waits for the deployments Pending or Running to end
OLD_RUN = 15.0  # seconds the old controllers may run on the sealed log before they must have stopped


class Moves:
    """Moving the run's log to a fresh store (a part of chaos.Chaos)."""

    def move_points(self) -> list[float]:
        n = self.args.moves
        return [(i + 0.5) / n for i in range(n)] if n else []

    def move_log(self, verdict: Verdict) -> None:
        number = self.counts["moves"] + 1
        old_env, old_commands = self.env, self.commands
        self.cli(["--as", "chaos-move", "freeze", "--all", "--reason", f"move {number}"])
        sealed, started = None, time.monotonic()
        while time.monotonic() - started < SEAL_WAIT:
            self.maintain_controllers(verdict)
            rc, out, err = self.cli(["--as", "chaos-move", "log", "export", "--seal", "--reason", f"move {number}"])
            if rc == 0:
                sealed = out
                break
            if rc != 1 or "Pending or Running" not in err:
                verdict.add("move_failures", {"move": number, "rc": rc, "stderr": err.strip()[-300:]})
                break
            time.sleep(0.2)
        if sealed is None:
            verdict.add("move_failures", {"move": number, "why": "a deployment stayed Pending or Running"})
            self.cli(["--as", "chaos-move", "unfreeze", "--all"])
            return
        self.log_ids.append(self.json_of(["log", "verify"])["log_id"])
        self.probe_sealed(verdict, number)
        self.old_deployers += self.json_of(["deployers", "list", "--all"])
        export = self.tmp / f"move-{number}.jsonl"
        export.write_text(sealed)
        self.switch_store(number)
        rc, _, err = self.cli(["log", "import", str(export)], timeout=900)
        if rc != 0:
            verdict.add("move_failures", {"move": number, "import": rc, "stderr": err.strip()[-300:]})
        self.wait_old_controllers(verdict, number)
        if old_commands is not None:
            self.old_commands.append(old_commands)
        self.log_ids.append(self.json_of(["log", "verify"])["log_id"])
        self.move_cuts.append(len(self.sink.received))
        self.maintain_controllers(verdict)
        self.cli(["--as", "chaos-move", "unfreeze", "--all"])
        shutil_backup(self)
        self.counts["moves"] += 1
        self.log(f"move {number}: sealed {len(sealed.splitlines())} events, imported from {old_env['ROLLOUTS_HOME']}")

    def probe_sealed(self, verdict: Verdict, number: int) -> None:
        """A write and a late controller on the sealed log: each refused (exit 1) naming the seal."""
        name = self.configs[0].name
        for argv in (["freeze", name, "--reason", "after the seal"], ["controller", "run", "--once"]):
            rc, _, err = self.cli(["--as", "chaos-move", *argv])
            if rc != 1 or "sealed" not in err:
                verdict.add("sealed_not_refused", {"move": number, "argv": argv, "rc": rc, "stderr": err[-300:]})

    def wait_old_controllers(self, verdict: Verdict, number: int) -> None:
        """The old controllers ran on against the sealed log: each must stop by itself, exit 1 naming the
        seal; then controllers start on the new store."""
        deadline = time.monotonic() + OLD_RUN
        for c in self.controllers:
            if c.proc is None:
                continue
            while c.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            rc = c.proc.poll()
            said = tail(c.log) if c.log else ""
            if rc != 1 or "sealed" not in said:
                verdict.add("sealed_not_refused", {"move": number, "controller": c.slot, "rc": rc, "log": said})
                if rc is None:
                    c.proc.kill()
                    c.proc.wait()
            else:
                self.counts["old_controllers_refused"] += 1
            c.proc = None
            c.down_until = 0.0

    def switch_store(self, number: int) -> None:
        """Every command and controller from now on: a fresh home and store."""
        self.home = self.tmp / f"home-moved-{number}"
        env = {**self.env, "ROLLOUTS_HOME": str(self.home)}
        if self.schema is not None:
            schema = f"{self.schema}_m{number}"
            self.move_schemas.append(schema)
            env["ROLLOUTS_STORE"] = f"{self.args.store}{'&' if '?' in self.args.store else '?'}schema={schema}"
        self.env = env
        if self.args.cli == "fork":
            self.commands = ForkedCli(self.work, self.env, self.logs / f"cli-server-{number}.log")
        else:
            self.commands = FreshCli(self.work, self.env)


def shutil_backup(chaos: Any) -> None:
    """A copy of the old home's views is another log's: no restore of it after a move."""
    import shutil

    shutil.rmtree(chaos.backup, ignore_errors=True)
