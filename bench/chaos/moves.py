"""The chaos run's moves (bench/chaos/run.py --moves N): the log sealed, imported into a fresh store, and the
old controllers left running against the sealed source, which must refuse them.

A move, while controllers run and no command is in flight: `freeze --all` (no new claim), `log export
--seal` until no deployment is New, Pending or Running any more (a move carries no open work: a deployment
still open after CANCEL_AFTER seconds is cancelled, as an operator would), then on the sealed source a write and a
late `controller run --once` (each must exit 1 naming the seal) while the old controllers go on until
they stop by themselves (exit 1, naming the seal: `sealed_not_refused` counts every refusal that did not
happen), `log import` of the export into a fresh store with a home of its own (a new schema with
--store), and the run goes on there: new controllers, `unfreeze --all`. What the checks need of the
old homes is kept: their deployers (a step killed there stays alive until its ended_at there), the
log ids (a notification's key names the log that sent it) and where in the sink's requests each
move happened.

Copies sealed behind the source's back (a SQLite log only: its file is what is copied): up to three a move,
as it starts (controllers still running, so the copy holds open work), when only New deployments are open
(frozen, not yet claimed: what a seal used to take) and when nothing is open (just before the seal), the
log's file is copied through SQLite's backup API (a byte copy of it as it stands) into a home of its own,
sealed there and, when the seal is taken, imported into a third home with no --fork, whose controller
then runs until idle (the copy's sink removed and the move's freeze lifted first: its notifications are
not the run's, and its owner runs what it holds). The source knows nothing of it and goes on: two logs
from one history. copy_ran_twice counts every deployer of that history that ran in both (a name a copy's
runtime holds that the run's own homes hold too); copies, copies_sealed and copies_refused say how many
copies were made, sealed or refused.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from typing import Any

from bench.chaos.model import Verdict, tail
from bench.chaos.notify import NAME as SINK
from bench.shared.cli_server import ForkedCli, FreshCli

SEAL_WAIT = 120.0  # seconds a move waits for the deployments New, Pending or Running to end
OLD_RUN = 15.0  # seconds the old controllers may run on the sealed log before they must have stopped
CANCEL_AFTER = 3.0  # seconds a move waits for open deployments to end before it cancels them


class Moves:
    """Moving the run's log to a fresh store (a part of chaos.Chaos)."""

    def move_points(self) -> list[float]:
        n = self.args.moves
        return [(i + 0.5) / n for i in range(n)] if n else []

    def move_log(self, verdict: Verdict) -> None:
        number = self.counts["moves"] + 1
        old_env, old_commands = self.env, self.commands
        self.copy_behind_back(f"{number}-live")
        self.cli(["--as", "chaos-move", "freeze", "--all", "--reason", f"move {number}"])
        sealed, started = None, time.monotonic()
        while time.monotonic() - started < SEAL_WAIT:
            self.maintain_controllers(verdict)
            left = self.open_deployments()
            # a copy when nothing is open, and one when only New deployments are (frozen, not yet claimed)
            point = "quiet" if not left else "new" if set(left.values()) == {"New"} else None
            if point is not None and f"{number}-{point}" not in self.copy_homes:
                self.copy_behind_back(f"{number}-{point}")
            rc, out, err = self.cli(["--as", "chaos-move", "log", "export", "--seal", "--reason", f"move {number}"])
            if rc == 0:
                sealed = out
                break
            if rc != 1 or "New, Pending or Running" not in err:
                verdict.add("move_failures", {"move": number, "rc": rc, "stderr": err.strip()[-300:]})
                break
            if time.monotonic() - started > CANCEL_AFTER:
                self.cancel_open(err)
            time.sleep(0.2)
        if sealed is None:
            verdict.add("move_failures", {"move": number, "why": "a deployment stayed New, Pending or Running"})
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

    def open_deployments(self) -> dict[str, str]:
        """The configs whose latest deployment is New, Pending or Running, and its phase."""
        found = {}
        for conf in self.configs:
            _, out, _ = self.cli(["rollout", "status", conf.name, "-o", "json"])
            try:
                phase = json.loads(out).get("phase")
            except (ValueError, AttributeError):  # no deployment yet (exit 4), or no answer
                phase = None
            if phase in ("New", "Pending", "Running"):
                found[conf.name] = phase
        return found

    def cancel_open(self, refusal: str) -> None:
        """Cancel the deployments a refused seal names (all configs' when it names only some), so that the log
        can be sealed: a move carries no open work."""
        named = set(re.findall(r"([a-z0-9-]+) version \d+", refusal))
        for name in sorted(named if " more)" not in refusal else {c.name for c in self.configs}):
            self.run_op(self.new_op("cancel", name, ["rollout", "cancel", name]))

    def copy_behind_back(self, label: str) -> None:
        """A byte copy of the log, sealed in a home of its own and imported into a third (see the module's
        docstring); the source is not told."""
        if self.schema is not None:  # a PostgreSQL log: no file to copy
            return
        self.copy_homes.add(label)
        copy, third = self.tmp / f"copy-{label}", self.tmp / f"copy-{label}-imported"
        copy.mkdir(mode=0o700)
        with sqlite3.connect(self.home / "events.db") as source, sqlite3.connect(copy / "events.db") as into:
            source.backup(into)
        (copy / "events.db").chmod(0o600)
        self.counts["copies"] += 1
        rc, out, err = self.at_home(copy, ["log", "export", "--seal", "--reason", f"copy {label}"])
        if rc != 0:
            self.counts["copies_refused"] += 1
            if "New, Pending or Running" not in err:
                self.verdict.add("move_failures", {"copy": label, "rc": rc, "stderr": err.strip()[-300:]})
            return
        (self.tmp / f"copy-{label}.jsonl").write_text(out)
        rc, _, err = self.at_home(third, ["log", "import", str(self.tmp / f"copy-{label}.jsonl")])
        if rc != 0:
            self.counts["copies_refused"] += 1
            return
        self.counts["copies_sealed"] += 1
        self.at_home(third, ["notify", "remove", SINK])
        self.at_home(third, ["unfreeze", "--all"])  # the copy's owner lifts the move's freeze: a log of their own
        self.at_home(third, ["controller", "run", "--until-idle", "--timeout", "60", "-q"])
        rc, out, _ = self.at_home(third, ["deployers", "list", "--all", "-o", "json"])
        self.copy_deployers[label] = [row["name"] for row in json.loads(out)] if rc == 0 else []

    def at_home(self, home: Any, argv: list[str]) -> tuple[int, str, str]:
        """`rollouts ARGV` in another home (a copy's): a process of its own."""
        env = {**self.env, "ROLLOUTS_HOME": str(home)}
        proc = subprocess.run(
            [sys.executable, "-m", "rollouts", "--as", "chaos-copy", *argv],
            env=env,
            cwd=self.work,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return proc.returncode, proc.stdout, proc.stderr

    def check_copies(self, verdict: Verdict, deployers: list[dict[str, Any]]) -> None:
        """copy_ran_twice: a deployer a copy's import ran that the run's own homes ran too."""
        ran = {row["name"] for row in deployers}
        for label, names in self.copy_deployers.items():
            for name in sorted(set(names) & ran):
                verdict.add("copy_ran_twice", {"copy": label, "deployer": name})

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
