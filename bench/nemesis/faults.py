"""The nemesis run's faults (bench/nemesis/run.py): what a fault window does to one host, and undoes.

Kinds (each window is one host's; a host has at most one window at a time):

- partition: both ways (the veth down, bench/nemesis/net.py), 0.5-2 leases;
- replies_lost: the proxy drops the server's answers (a COMMIT's outcome unknown), 0.3-1.5 leases,
  its broken connections reset at the end;
- delay: every byte held for 1.1-1.5 leases, for a window as long;
- reset: every connection of the host reset (instant);
- pause: SIGSTOP of every pid of the namespace (`ip netns pids`) for 0.5-3 leases; on waking,
  the deployers (processes with ROLLOUT_CLAIM in their environment) first, the rest 0.5 s later;
- clock_step: the host's wall clock stepped by +-(L/2..2L) for 1-3 leases, then back (through
  bench/nemesis/clock/sitecustomize.py: every Python process of the host reads it);
- terminate: pg_terminate_backend of every connection of the run's hosts (their store URLs name the
  run's schema as application_name: nothing else on the server is touched): instant;
- kill: the host's controller SIGKILLed, restarted 0-1 lease later.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("partition", "replies_lost", "delay", "reset", "pause", "clock_step", "terminate", "kill")
INSTANT = ("reset", "terminate", "kill")


@dataclass
class Window:
    kind: str
    host: int
    start: float  # time.time() (real: the harness's clock is never stepped)
    end: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)


def has_claim(pid: int) -> bool:
    """Whether `pid` is a deployer's (or its child's): ROLLOUT_CLAIM in its environment."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return b"\0ROLLOUT_CLAIM=" in b"\0" + f.read()
    except OSError:
        return False


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


class FaultDriver:
    """Opens and closes fault windows on hosts (a part of nemesis.Nemesis)."""

    lease: float
    schema: str  # the run's schema, and its clients' application_name
    pg_url: str
    hosts: list[Any]
    windows: list[Window]
    lock: threading.Lock

    def open_window(self, kind: str, index: int) -> Window:
        host = self.hosts[index]
        rng = self.fault_rng
        lease = self.lease
        w = Window(kind, index, time.time())
        if kind == "partition":
            w.detail["seconds"] = rng.uniform(0.5, 2) * lease
            host.net.link(False)
        elif kind == "replies_lost":
            w.detail["seconds"] = rng.uniform(0.3, 1.5) * lease
            host.proxy.set("replies_lost")
        elif kind == "delay":
            w.detail["seconds"] = w.detail["delay"] = rng.uniform(1.1, 1.5) * lease
            host.proxy.set("delay", w.detail["delay"])
        elif kind == "reset":
            w.detail["connections"] = host.proxy.reset_all()
        elif kind == "pause":
            w.detail["seconds"] = rng.uniform(0.5, 3) * lease
            pids = [p for p in host.net.pids() if p != os.getpid()]
            signal_all(pids, signal.SIGSTOP)
            w.detail["pids"] = len(pids)
            host.paused = True
        elif kind == "clock_step":
            step = rng.uniform(lease / 2, 2 * lease) * rng.choice((-1, 1))
            w.detail.update(seconds=rng.uniform(1, 3) * lease, step=round(step, 2))
            Path(host.clock_file).write_text(f"{step:.3f}")
        elif kind == "terminate":
            w.detail["backends"] = self.terminate_backends()
        elif kind == "kill":
            w.detail["killed"] = self.kill_controller(host, delay=rng.uniform(0, 1) * lease)
        if kind in INSTANT:
            w.end = w.start
        with self.lock:
            self.windows.append(w)
            host.window = None if kind in INSTANT else w
        return w

    def close_window(self, w: Window) -> None:
        host = self.hosts[w.host]
        if w.kind == "partition":
            host.net.link(True)
        elif w.kind in ("replies_lost", "delay"):
            host.proxy.set("ok")
        elif w.kind == "pause":
            self.wake(host)
        elif w.kind == "clock_step":
            Path(host.clock_file).write_text("0")
        w.end = time.time()
        with self.lock:
            host.window = None

    def wake(self, host: Any) -> None:
        """Deployers first (they must find their claim ended, by `claim check`), the rest 0.5 s later."""
        pids = host.net.pids()
        first = [p for p in pids if has_claim(p)]
        signal_all(first, signal.SIGCONT)
        time.sleep(0.5)
        signal_all(host.net.pids(), signal.SIGCONT)
        host.paused = False

    def terminate_backends(self) -> int:
        """pg_terminate_backend of every connection of the run's hosts (application_name: the run's schema),
        never another client of the server (tests running beside this run, say)."""
        import psycopg

        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND application_name = %s",
                (self.schema,),
            ).fetchall()
        return len(rows)

    def fault_loop(self) -> None:
        """Until stopped: open a window on a free host every `gap` seconds, close each when due."""
        bag: list[str] = []
        while not self.fault_stop.is_set():
            now = time.time()
            for host in self.hosts:
                w = host.window
                if w is not None and now >= w.start + w.detail.get("seconds", 0):
                    self.close_window(w)
            free = [h.index for h in self.hosts if h.window is None]
            if free and now >= self.next_fault:
                if not bag:
                    bag = list(KINDS) * 2
                    self.fault_rng.shuffle(bag)
                kind = bag.pop()
                index = self.fault_rng.choice(free)
                w = self.open_window(kind, index)
                self.log(f"fault {kind} on host {index}: {w.detail}")
                self.next_fault = now + self.fault_rng.uniform(0.3, 1.0) * self.gap
            self.fault_stop.wait(0.05)
        for host in self.hosts:
            if host.window is not None:
                self.close_window(host.window)
