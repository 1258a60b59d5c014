"""The nemesis run's network (bench/nemesis/run.py): one network namespace per host, joined to the root
namespace by a veth pair, and a fault proxy per host in the root namespace that the harness drives.

Each host reaches PostgreSQL only through its proxy, which listens on the root side of its veth and
forwards to 127.0.0.1:5432. Faults:

- partition (both ways): the root side of the veth set down: every packet either way is dropped,
  connections stall (TCP retransmits) and new ones time out, until the link comes up again;
- replies lost: the proxy forwards what the host sends and drops every byte the server answers
  (a COMMIT arrives and commits, its answer never comes); a connection that lost a reply is reset
  when the window ends (its stream has a hole: nothing could use it again);
- delay: every byte either way is held for a fixed time (past the lease), in order;
- reset: every connection of the host is reset at once (RST: SO_LINGER 0, then close).

Names start with PREFIX and the run's tag; a run holds its tag's lock file for its whole life
(`claim_tag()`), so runs side by side (two test suites on one machine) use their own names and
subnets, and `cleanup_leftovers()` removes only what a run that is gone left behind (namespaces with
their processes, veths). Needs root: `unavailable()` says why not, where not.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import random
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

PREFIX = "nmt"  # (runs before tags were held used "nmz" and removed every "nmz" name at their start)
TAGS = 150  # a tag is also its hosts' subnet, 10.(100 + tag).(host).0/24
LOCKS = Path("/run/lock/rollouts-nemesis")
PG_TARGET = ("127.0.0.1", 5432)
PROXY_PORT = 5432


def ip(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *argv], capture_output=True, text=True, check=check, timeout=30)


def unavailable() -> str | None:
    """Why namespaces cannot be made here (None: they can): `ip netns add` must work (root)."""
    name = f"{PREFIX}probe{os.getpid()}"
    try:
        made = ip("netns", "add", name, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return f"`ip netns add` cannot run: {error}"
    if made.returncode != 0:
        return f"`ip netns add` failed (root is needed): {made.stderr.strip()}"
    ip("netns", "del", name, check=False)
    return None


def namespace_pids(ns: str) -> list[int]:
    done = ip("netns", "pids", ns, check=False)
    return [int(p) for p in done.stdout.split() if p.isdigit()]


def kill_namespace(ns: str) -> None:
    """SIGKILL (and SIGCONT, for the stopped) every process of `ns`, then delete it."""
    for _ in range(3):
        pids = namespace_pids(ns)
        if not pids:
            break
        for pid in pids:
            for sig in (signal.SIGKILL, signal.SIGCONT):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        time.sleep(0.2)
    ip("netns", "del", ns, check=False)


def claim_tag() -> tuple[int, IO[str]]:
    """A tag that no live run holds, and its lock file, held until the file is closed (or we die)."""
    LOCKS.mkdir(parents=True, exist_ok=True)
    for tag in random.Random().sample(range(TAGS), TAGS):
        lock = open(LOCKS / f"{tag}.lock", "w")  # noqa: SIM115 - held for the run's life
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return tag, lock
    raise RuntimeError(f"all {TAGS} nemesis tags are held by live runs ({LOCKS})")


def held_by_a_live_run(name: str) -> bool:
    """Whether `name` (PREFIX, four hex digits of a tag, then the rest) is a live run's: its tag's lock
    is held (by another run, or by this process through its own claim)."""
    try:
        tag = int(name[len(PREFIX) : len(PREFIX) + 4], 16)
    except ValueError:
        return True  # not one of a run's names (a probe's): left alone
    with open(LOCKS / f"{tag}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
    return False


def cleanup_leftovers() -> list[str]:
    """Remove namespaces and links named with our prefix whose run is gone (it died); what was removed."""
    LOCKS.mkdir(parents=True, exist_ok=True)
    removed = []
    for line in ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(PREFIX) and not held_by_a_live_run(name):
            kill_namespace(name)
            removed.append(name)
    for line in ip("-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if name.startswith(PREFIX) and not held_by_a_live_run(name):
                ip("link", "del", name, check=False)
                removed.append(name)
    return removed


@dataclass
class Host:
    """One controller host: its namespace, its veth pair and the addresses on each side."""

    index: int
    ns: str
    veth_root: str
    veth_ns: str
    root_ip: str
    ns_ip: str

    @classmethod
    def make(cls, index: int, tag: int) -> Host:
        net = f"10.{100 + tag}.{index}"
        host = cls(index, f"{PREFIX}{tag:04x}h{index}", f"{PREFIX}{tag:04x}r{index}", f"{PREFIX}{tag:04x}n{index}",
                   f"{net}.1", f"{net}.2")  # fmt: skip
        ip("netns", "add", host.ns)
        ip("link", "add", host.veth_root, "type", "veth", "peer", "name", host.veth_ns)
        ip("link", "set", host.veth_ns, "netns", host.ns)
        ip("addr", "add", f"{host.root_ip}/24", "dev", host.veth_root)
        ip("link", "set", host.veth_root, "up")
        ip("netns", "exec", host.ns, "ip", "addr", "add", f"{host.ns_ip}/24", "dev", host.veth_ns)
        ip("netns", "exec", host.ns, "ip", "link", "set", host.veth_ns, "up")
        ip("netns", "exec", host.ns, "ip", "link", "set", "lo", "up")
        return host

    def remove(self) -> None:
        kill_namespace(self.ns)
        ip("link", "del", self.veth_root, check=False)

    def prefix(self) -> list[str]:
        """The argv prefix that runs a command on this host."""
        return ["ip", "netns", "exec", self.ns]

    def pids(self) -> list[int]:
        return namespace_pids(self.ns)

    def link(self, up: bool) -> None:
        ip("link", "set", self.veth_root, "up" if up else "down")


class _Pair:
    """One proxied connection: the host's side, the server's side, and whether a reply was lost on it."""

    def __init__(self, client: asyncio.StreamWriter, server: asyncio.StreamWriter) -> None:
        self.client, self.server = client, server
        self.lost = False

    def reset(self) -> None:
        for writer in (self.client, self.server):
            sock = writer.get_extra_info("socket")
            with contextlib.suppress(OSError):
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()


class FaultProxy:
    """A TCP proxy from one host to PostgreSQL whose mode the harness sets: ok, replies_lost or delay."""

    def __init__(self, loop: asyncio.AbstractEventLoop, listen: str) -> None:
        self.loop, self.listen = loop, listen
        self.mode = "ok"
        self.delay = 0.0
        self.pairs: set[_Pair] = set()
        self.server: asyncio.AbstractServer | None = None
        self.connections = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, self.listen, PROXY_PORT, reuse_address=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*PG_TARGET)
        except OSError:
            writer.transport.abort()
            return
        pair = _Pair(writer, up_writer)
        self.pairs.add(pair)
        self.connections += 1
        try:
            await asyncio.gather(self._pump(pair, reader, up_writer, True), self._pump(pair, up_reader, writer, False))
        finally:
            self.pairs.discard(pair)
            for w in (writer, up_writer):
                w.transport.abort()

    async def _pump(self, pair: _Pair, src: asyncio.StreamReader, dst: asyncio.StreamWriter, upward: bool) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        deliver = asyncio.ensure_future(self._deliver(queue, dst))
        try:
            while data := await src.read(65536):
                if not upward and (self.mode == "replies_lost" or pair.lost):
                    pair.lost = True  # dropped: the stream has a hole from here on
                    continue
                held = self.delay if self.mode == "delay" else 0.0
                queue.put_nowait((time.monotonic() + held, data))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            queue.put_nowait((0.0, b""))
            with contextlib.suppress(Exception):
                await deliver

    @staticmethod
    async def _deliver(queue: asyncio.Queue[tuple[float, bytes]], dst: asyncio.StreamWriter) -> None:
        while True:
            at, data = await queue.get()
            if not data:
                dst.transport.abort()
                return
            wait = at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            dst.write(data)
            await dst.drain()

    def set(self, mode: str, delay: float = 0.0) -> None:
        """Called from the harness's thread: the mode from now on (ok ends a window)."""

        def apply() -> None:
            ending = self.mode == "replies_lost" and mode != "replies_lost"
            self.mode, self.delay = mode, delay
            if ending:
                for pair in [p for p in self.pairs if p.lost]:
                    pair.reset()

        self.loop.call_soon_threadsafe(apply)

    def reset_all(self) -> int:
        """Reset every connection of the host now; how many there were."""
        done = threading.Event()
        count = [0]

        def apply() -> None:
            count[0] = len(self.pairs)
            for pair in list(self.pairs):
                pair.reset()
            done.set()

        self.loop.call_soon_threadsafe(apply)
        done.wait(10)
        return count[0]


class ProxyLoop:
    """An asyncio loop in a thread of its own, holding one FaultProxy per host."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="nemesis-proxies", daemon=True)
        self.thread.start()
        self.proxies: list[FaultProxy] = []

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def add(self, listen: str) -> FaultProxy:
        proxy = FaultProxy(self.loop, listen)
        self.run(proxy.start())
        self.proxies.append(proxy)
        return proxy

    def close(self) -> None:
        async def stop() -> None:
            for proxy in self.proxies:
                if proxy.server is not None:
                    proxy.server.close()
                for pair in list(proxy.pairs):
                    pair.reset()

        with contextlib.suppress(Exception):
            self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
