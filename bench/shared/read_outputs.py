#!/usr/bin/env python3
"""Golden outputs of every read command and web route of `rollouts`, to prove a refactor changes none.

Standard library only. The program under test is only ever run as a subprocess,
`PYTHON -m rollouts ...`, with the interpreter given by --python and, when given, PYTHONPATH=--pythonpath
(nothing else of the caller's PYTHONPATH or ROLLOUTS_* settings reaches it).

    read_outputs.py [--python PY] [--pythonpath DIR] build HOME_DIR [--pg-store URL | --no-pg]
    read_outputs.py [--python PY] [--pythonpath DIR] dump HOME_DIR OUT_DIR
    read_outputs.py compare OUT_A OUT_B

HOME_DIR is a *bundle* made by `build` (with one code version, normally the old one):

    golden.json   what the dump needs to know (configs, revisions, positions, claims, ...), taken
                  from the home right after it was built, so the dump's list of commands never
                  depends on the code under test (only the recursive --help walk does, on purpose)
    sqlite/       a home on the embedded SQLite store: its history starts with a log move
                  (export --seal from source/, import here), then steps, verification, an automatic
                  rollback, abort, approvals, freezes, cancel/retry/undo/supersede, a timeout, a
                  deleted deployer, hooks, history-limit pruning, pass-env, config-change trigger,
                  notifications delivered to a loopback sink (and one failing sink), a checkpoint
    source/       the sealed SQLite source home of that move (a few reads are dumped from it too)
    pg/           a home whose store is the PostgreSQL schema in golden.json (same scenario; its
                  log moved there from a SQLite home, as docs/moving.md does)
    files/        the move's export, an Ed25519 key pair and checkpoints signed during the build
    work/         the controllers' (so the deployers') working directory

`dump` copies the whole bundle into a fresh temporary directory (the original is never touched:
each dump reads its own copy), runs the read commands there in -o table and -o json, the
--help of every command and group (found recursively), and `rollouts serve --port 0` on each home
with every route fetched. It writes OUT_DIR/<name>.out for the SQLite home (commands, then
http_*.out and serve_*.out), OUT_DIR/global/ for what reads no home (every --help, found by
walking `Commands:` recursively, each group without its verb, completion scripts, usage errors,
a missing home), OUT_DIR/source/ for the sealed source and OUT_DIR/pg/ for PostgreSQL. A
command's file is its stdout, a line `--- stderr ---`, its stderr, a line `--- exit N ---`. A
route's file is the status line, the response headers but Date and Server, a blank line, the body.

The PostgreSQL store itself cannot be copied like a directory: every dump reads the one schema,
and OUT_DIR/pg/_store_fingerprint.out records an md5 of every table in it before and after the
dump, so a read that wrote to the store shows up as a difference (and spoils later dumps: rebuild).

NORMALISATIONS (everything else is compared byte for byte):
  N1  The temporary directory the bundle was copied to (a fresh mkdtemp per dump) is replaced by
      `<TMP>` in every output (it shows as the home in `home rebind --dry-run`, warnings, ...).
  N2  The port `serve --port 0` picked is replaced by `<PORT>` in serve's own stdout/stderr (its
      URL line); the routes are fetched with Host headers that carry no port.
  N3  Date and Server response headers are left out (wall clock; the Python version).
  N4  `log checkpoint` signs the wall-clock time (to the second): in its output only, the
      `time ...Z` value becomes `<NOW>` and the Ed25519 signature (which covers that time)
      becomes `<SIGNATURE>`. The rest (log id, position, hash, key name, layout) stays exact.
      (`log verify --checkpoint` of a checkpoint made during the build is compared exactly.)
  The environment is fixed instead of normalised: TZ=UTC, LANG=LC_ALL=C.UTF-8, COLUMNS=80 (help
  text wraps to it), NO_COLOR unset, HOME and PATH the caller's, no ROLLOUTS_* variable.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import hashlib
import http.client
import http.server
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test?schema=golden_ro"
PSQL_URL = "postgresql://postgres@127.0.0.1:5432/test"
TIMEOUT = 90  # seconds any one command may take in a dump (a hung one is recorded, not waited for)
SINK_ENV = "GOLDEN_SINK_URL"  # a sink whose URL the controller reads from its environment (--url-env)
SECRET_ENV = "GOLDEN_SECRET"  # passed to one config's deployer with --pass-env
TOKEN_ENV = "GOLDEN_TOKEN"  # serve --token-env
TOKEN = "golden-token-0123456789"


def say(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


# -- running the program ----------------------------------------------------------------------------


class Program:
    """`PYTHON -m rollouts` with a clean, fixed environment."""

    def __init__(self, python: str, pythonpath: str | None) -> None:
        self.python = python
        self.pythonpath = pythonpath

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/root"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TZ": "UTC",
            "COLUMNS": "80",
            "PYTHONUNBUFFERED": "1",
        }
        for key in ("USER", "LOGNAME"):
            if key in os.environ:
                env[key] = os.environ[key]
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        env.update(extra or {})
        return env

    def argv(self, args: list[str]) -> list[str]:
        return [self.python, "-m", "rollouts", *args]

    def which(self) -> str:
        code = "import rollouts, rollouts.adapters.cli as c; print(rollouts.__file__); print(c.__file__)"
        out = subprocess.run([self.python, "-c", code], env=self.env(), capture_output=True, text=True, cwd="/")
        if out.returncode != 0:
            raise SystemExit(f"cannot import rollouts with {self.python}: {out.stderr}")
        return out.stdout.strip().replace("\n", " and ")


class Home:
    """One rollouts home (and store) driven by a Program during the build."""

    def __init__(self, prog: Program, home: Path, store: str | None, cwd: Path, env: dict[str, str] | None = None):
        self.prog, self.home, self.store, self.cwd = prog, home, store, cwd
        self.extra = env or {}

    def globals(self, actor: str | None) -> list[str]:
        args = ["--home", str(self.home)]
        if self.store:
            args += ["--store", self.store]
        if actor:
            args += ["--as", actor]
        return args

    def run(
        self,
        *args: str,
        actor: str = "alice@laptop",
        ok: tuple[int, ...] = (0,),
        stdin: bytes | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        argv = self.prog.argv([*self.globals(actor), *args])
        done = subprocess.run(
            argv,
            cwd=self.cwd,
            env=self.prog.env(self.extra),
            capture_output=True,
            text=True,
            input=None if stdin is None else stdin.decode(),
            timeout=timeout,
        )
        shown = " ".join(shlex.quote(a) for a in args)
        say(f"  [{done.returncode}] {actor} $ rollouts {shown}")
        if done.returncode not in ok:
            raise SystemExit(f"unexpected exit {done.returncode} of `rollouts {shown}`:\n{done.stdout}\n{done.stderr}")
        return done

    def json(self, *args: str) -> object:
        return json.loads(self.run(*args, "-o", "json", ok=(0, 1)).stdout)

    def control(self) -> None:
        self.run("controller", "run", "--until-idle", "--timeout", "60", "-q", actor="controller@host-a")

    def popen(self, *args: str, actor: str = "controller@host-a") -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.prog.argv([*self.globals(actor), *args]),
            cwd=self.cwd,
            env=self.prog.env(self.extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


# -- a notification sink on loopback ----------------------------------------------------------------


class Sink:
    """Records every POST; `/ok` answers 200 and `/fail` 503 (a sink that keeps failing)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, bytes]] = []
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                sink.received.append((self.path, self.headers.get("Idempotency-Key", ""), body))
                status = 503 if self.path.startswith("/fail") else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- build ------------------------------------------------------------------------------------------

WEB_CMD = ["sh", "-c", 'echo "deploying $ROLLOUT_CONFIG v$ROLLOUT_VERSION on port $PORT"']
SHOP_CMD = ["sh", "-c", 'echo "shop now serves $ROLLOUT_WEIGHT% (step $ROLLOUT_STEP of $ROLLOUT_STEPS)"']
SHOP_VERIFY = 'sh -c "echo error rate $ERRORS%; test $ERRORS -lt 5"'


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def build_move_source(src: Home, export: Path) -> None:
    """A short history on a SQLite home, sealed and exported (docs/moving.md): web v1 Complete, legacy v1
    left New (it moves with the log and runs on the target)."""
    src.run("config", "create", "web", "--env", "PORT=8080", "--timeout", "120", "--", *WEB_CMD)
    src.run("rollout", "latest", "web", "--reason", "first release")
    src.control()
    src.run("config", "create", "legacy", "--history-limit", "2", "--", "sh", "-c", "echo legacy v$ROLLOUT_VERSION")
    src.run("rollout", "latest", "legacy", "--reason", "moves with the log")
    with export.open("w") as out:
        argv = src.prog.argv(
            [*src.globals("alice@laptop"), "log", "export", "--seal", "--reason", "to the golden home"]
        )
        done = subprocess.run(argv, cwd=src.cwd, env=src.prog.env(), stdout=out, stderr=subprocess.PIPE, text=True)
    say(f"  [{done.returncode}] $ rollouts log export --seal > {export.name}: {done.stderr.strip()}")
    if done.returncode != 0:
        raise SystemExit("seal failed")
    src.run("controller", "run", "--once", ok=(1,))  # a sealed log takes no claim
    src.run("config", "set", "web", "--env", "A=1", ok=(1,))  # ... and no write


def build_target(h: Home, export: Path, sink: Sink, files: Path, tag: str) -> None:
    """Everything else, on the home the log moved into."""
    h.run("log", "import", str(export))
    h.control()  # legacy v1, New when sealed, runs once on the new log

    # Notifications: every kind to /ok, complete,failed of web to a sink that always fails, and one
    # sink whose URL the controller reads from its environment.
    h.run(
        "notify",
        "add",
        "ops",
        "--url",
        f"{sink.url}/ok/ops",
        "--on",
        "triggered,running,complete,failed,paused,rollback",
    )
    h.run("notify", "add", "broken", "--url", f"{sink.url}/fail/broken", "--config", "web")
    h.run("notify", "add", "from-env", "--url-env", SINK_ENV, "--on", "complete")

    # web: cancel, retry, undo, supersede, pause/resume (README's walkthrough and more).
    h.run("config", "set", "web", "--env", "PORT=9090")
    h.run("rollout", "latest", "web")
    h.run("rollout", "latest", "web", ok=(1,))
    h.run("rollout", "cancel", "web")
    h.run("rollout", "retry", "web")
    h.control()
    h.run("rollout", "undo", "web", "--to-revision", "1")
    h.control()
    h.run("rollout", "latest", "web", "--reason", "to be superseded")
    h.run("rollout", "latest", "web", "--supersede", "--reason", "supersedes 4")
    h.control()
    h.run("rollout", "pause", "web")
    h.run("rollout", "latest", "web", ok=(1,))
    h.run("rollout", "resume", "web")

    # shop: steps with a manual pause and verification (docs/steps.md), promote, promote --full,
    # a failed verification and its automatic rollback, an abort and its rollback.
    h.run(
        "config",
        "create",
        "shop",
        "--env",
        "ERRORS=0",
        "--steps",
        "20,50,100",
        "--step-pause",
        "manual",
        "--verify",
        SHOP_VERIFY,
        "--verify-count",
        "2",
        "--verify-interval",
        "0",
        "--auto-rollback",
        "--",
        *SHOP_CMD,
    )
    h.run("rollout", "latest", "shop", "--reason", "shop 1.0")
    h.control()
    h.run("rollout", "promote", "shop", actor="bob@laptop")
    h.control()
    h.run("rollout", "promote", "shop", "--full", actor="bob@laptop")
    h.control()
    h.run("config", "set", "shop", "--env", "ERRORS=9")
    h.run("rollout", "latest", "shop", "--reason", "shop 1.1")
    h.control()  # verification fails, version 3 rolls back to 1
    h.run("rollout", "latest", "shop", "--reason", "shop 1.2")
    h.control()  # paused after step 1
    h.run("rollout", "abort", "shop", "--reason", "checkout errors")
    h.control()  # version 5 rolls back to 3
    h.run("rollout", "promote", "shop", ok=(1,))

    # canary: timed step pause, an inconclusive measurement pauses for a human, promote --full.
    h.run(
        "config",
        "create",
        "canary",
        "--steps",
        "50,100",
        "--step-pause",
        "1",
        "--verify",
        'sh -c "exit 3"',
        "--verify-count",
        "1",
        "--verify-timeout",
        "5",
        "--",
        "sh",
        "-c",
        "echo canary at $ROLLOUT_WEIGHT%",
    )
    h.run("rollout", "latest", "canary")
    h.control()
    h.run("rollout", "promote", "canary", "--full", actor="bob@laptop")
    h.control()

    # api: approvals by a second actor, hooks (a pre hook, a failing post hook that is ignored).
    h.run(
        "config",
        "create",
        "api",
        "--require-approval",
        "--pre-hook",
        'sh -c "echo pre hook $ROLLOUT_HOOK of $ROLLOUT_DEPLOYER"',
        "--post-hook",
        "false",
        "--post-hook-policy",
        "ignore",
        "--",
        "sh",
        "-c",
        "echo api v$ROLLOUT_VERSION",
    )
    h.run("rollout", "latest", "api", "--reason", "needs bob")
    h.control()  # waits for the approval; does not keep the controller
    h.run("rollout", "approve", "api", ok=(1,))  # the actor who asked cannot approve
    h.run("rollout", "approve", "api", actor="bob@laptop")
    h.control()

    # A checkpoint signed now, verified in the dump (its time is fixed from here on).
    checkpoint = h.run("log", "checkpoint", "--key", str(files / "key.pem"), "--name", "golden").stdout
    (files / f"checkpoint-{tag}.txt").write_text(checkpoint)

    # batch: a freeze holds it, unfreeze, a deployer that fails, a retry that fails again, then a fix;
    # history limit 1 prunes older deployers to tombstones.
    h.run("config", "create", "batch", "--history-limit", "1", "--", "false")
    h.run("freeze", "batch", "--reason", "incident 4711")
    h.run("rollout", "latest", "batch")
    h.control()  # frozen: waits in New
    h.run("unfreeze", "batch")
    h.run("unfreeze", "batch", ok=(1,))
    h.control()  # Failed (exit 1)
    h.run("rollout", "retry", "batch")
    h.control()
    h.run("config", "set", "batch", "--", "sh", "-c", "echo batch ok")
    h.run("rollout", "latest", "batch", "--reason", "fixed")
    h.control()

    # A freeze of all with an end a few seconds away: it ends by itself while the build goes on.
    h.run("freeze", "--all", "--until", iso(datetime.now(UTC) + timedelta(seconds=4)), "--reason", "short window")

    # slow: a timeout, then a deployer deleted while it runs (Lost).
    h.run("config", "create", "slow", "--timeout", "1", "--", "sleep", "5")
    time.sleep(4.5)  # the freeze of all is over
    h.run("rollout", "latest", "slow")
    h.control()
    h.run("config", "set", "slow", "--timeout", "60", "--", "sleep", "4")
    h.run("rollout", "latest", "slow", "--reason", "to be deleted")
    controller = h.popen("controller", "run", "--until-idle", "--timeout", "60", "-q")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rows = h.json("deployers", "list")
        if any(r["name"] == "slow-2-deploy-1" and r["state"] == "running" for r in rows):  # type: ignore[index,union-attr]
            break
        time.sleep(0.2)
    h.run("deployers", "delete", "slow-2-deploy-1")
    controller.wait(60)

    # cfgchg: a config-change trigger, a passed variable that never reaches the log.
    h.run(
        "config",
        "create",
        "cfgchg",
        "--trigger",
        "config-change",
        "--pass-env",
        SECRET_ENV,
        "--env",
        "LEVEL=1",
        "--",
        "sh",
        "-c",
        f'echo "level $LEVEL, secret ${{{SECRET_ENV}:+set}}"',
    )
    h.control()
    h.run("config", "set", "cfgchg", "--env", "LEVEL=2", "--env", "API_TOKEN=not-a-secret")
    h.control()
    h.run("config", "set", "cfgchg", "--env", "API_TOKEN-")
    h.control()

    # What stays at the end: freezes in force, a paused config, a deployment waiting for approval.
    h.run("rollout", "pause", "cfgchg")
    h.run("freeze", "shop", "--until", "2099-12-31T00:00:00", "--reason", "end of an era")
    h.run("freeze", "web", "canary", "--reason", "hold")
    h.run("rollout", "latest", "api", "--reason", "waiting for bob", actor="alice@laptop")
    h.control()  # delivers the last notifications
    h.run("notify", "remove", "from-env")
    h.run("projections", "status")  # every view caught up before the dumps copy the home


def gather(h: Home, files: Path, tag: str) -> dict[str, object]:
    """What the dump needs to know about a built home, read once, here, with the build's code."""
    verify = h.json("log", "verify")
    events = h.json("events")
    configs = [c["name"] for c in h.json("config", "list")]  # type: ignore[index,union-attr]
    revisions = {c: [r["version"] for r in h.json("rollout", "history", c)] for c in configs}  # type: ignore[index,union-attr]
    head = verify["head"]  # type: ignore[index]
    by_position = {e["position"]: e for e in events}  # type: ignore[index,union-attr]
    claims = [e["position"] for e in events if e["type"] == "DeployerClaimed"]  # type: ignore[index,union-attr]
    deployers = [d["name"] for d in h.json("deployers", "list", "--all")]  # type: ignore[index,union-attr]
    # Per config, a moment in the middle of its own history, for --as-of (a position, and that event's time).
    middle = {}
    for c in configs:
        own = [e for e in events if e["config"] == c]  # type: ignore[index,union-attr]
        middle[c] = own[len(own) // 2]
    return {
        "store": h.store,
        "log_id": verify["log_id"],  # type: ignore[index]
        "head": head,
        "head_hash": verify["head_hash"],  # type: ignore[index]
        "configs": configs,
        "revisions": revisions,
        "positions": sorted({1, head // 4, head // 2, (3 * head) // 4, head}),
        "times": [by_position[head // 3]["timestamp"], by_position[(2 * head) // 3]["timestamp"]],
        "types": sorted({e["type"] for e in events}),  # type: ignore[index,union-attr]
        "claims": [f"{verify['log_id']}:{claims[0]}", f"{verify['log_id']}:{claims[-1]}"],  # type: ignore[index]
        "deployers": deployers,
        "checkpoint": f"files/checkpoint-{tag}.txt",
        "asof": {c: e["position"] for c, e in middle.items()},
        "asof_time": {c: e["timestamp"] for c, e in middle.items()},
        "open": [c["name"] for c in h.json("config", "list") if c["latest_phase"] in ("New", "Pending", "Running")],  # type: ignore[index,union-attr]
    }


def drop_schema(url: str) -> None:
    schema = parse_qs(urlsplit(url).query).get("schema", [None])[0]
    if not schema or not re.fullmatch(r"[a-z_][a-z0-9_]*", schema):
        raise SystemExit(f"expected ?schema=NAME in {url}")
    subprocess.run(
        ["psql", PSQL_URL, "-v", "ON_ERROR_STOP=1", "-q", "-c", f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'], check=True
    )
    say(f"dropped schema {schema} (if it existed)")


def build(prog: Program, bundle: Path, pg_store: str | None) -> None:
    if bundle.exists():
        raise SystemExit(f"{bundle} exists: remove it first")
    started = time.monotonic()
    say(f"building with rollouts from {prog.which()}")
    files, work = bundle / "files", bundle / "work"
    for d in (files, work):
        d.mkdir(parents=True)
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(files / "key.pem")], check=True)
    subprocess.run(
        ["openssl", "pkey", "-in", str(files / "key.pem"), "-pubout", "-out", str(files / "pub.pem")], check=True
    )
    sink = Sink()
    meta: dict[str, object] = {"built_with": prog.which(), "built_at": datetime.now(UTC).isoformat()}
    try:
        env = {SINK_ENV: f"{sink.url}/ok/from-env", SECRET_ENV: "s3cret"}
        say("== sqlite: source home, sealed")
        source = Home(prog, bundle / "source", None, work, env)
        build_move_source(source, files / "move.jsonl")
        say("== sqlite: target home")
        target = Home(prog, bundle / "sqlite", None, work, env)
        build_target(target, files / "move.jsonl", sink, files, "sqlite")
        meta["sqlite"] = gather(target, files, "sqlite")
        meta["source"] = {"configs": ["web", "legacy"]}
        if pg_store:
            say("== postgresql: a SQLite home moved into the schema")
            drop_schema(pg_store)
            tmp_source = Home(prog, Path(tempfile.mkdtemp(prefix="golden-pgsrc-")) / "home", None, work, env)
            build_move_source(tmp_source, files / "move-pg.jsonl")
            shutil.rmtree(tmp_source.home.parent)
            pg = Home(prog, bundle / "pg", pg_store, work, env)
            build_target(pg, files / "move-pg.jsonl", sink, files, "pg")
            meta["pg"] = gather(pg, files, "pg")
    finally:
        sink.close()
    meta["sink_requests"] = len(sink.received)
    (bundle / "golden.json").write_text(json.dumps(meta, indent=2) + "\n")
    say(
        f"built {bundle} in {time.monotonic() - started:.0f} s; the sink got {len(sink.received)} requests "
        f"({sum(1 for p, _, _ in sink.received if p.startswith('/ok'))} to /ok)"
    )


# -- dump -------------------------------------------------------------------------------------------


def safe(parts: list[str]) -> str:
    """A file name for a command line: readable, and different for different command lines."""
    text = "_".join(parts)
    name = re.sub(r"[^A-Za-z0-9.=,+@-]+", "_", text).strip("_")[:150] or "rollouts"
    if len(text) > 150 or name != text.replace(" ", "_"):
        name += "." + hashlib.sha256(text.encode()).hexdigest()[:8]
    return name


class Dumper:
    """Runs read commands on one home of the copied bundle and writes one file per command."""

    def __init__(
        self,
        prog: Program,
        tmp: Path,
        home: Path,
        store: str | None,
        out: Path,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.prog, self.tmp, self.home, self.store, self.out = prog, tmp, home, store, out
        self.extra = extra_env or {}
        self.names: set[str] = set()
        self.ran: dict[str, tuple] = {}  # name -> the command line and env that made it
        out.mkdir(parents=True, exist_ok=True)

    def normalise(self, data: bytes) -> bytes:
        # N1: the temporary copy's path (also as a realpath, should /tmp be a link).
        for root in {str(self.tmp), os.path.realpath(self.tmp)}:
            data = data.replace(root.encode(), b"<TMP>")
        return data

    def write(self, name: str, data: bytes) -> None:
        if name in self.names:
            raise SystemExit(f"two outputs named {name}")
        self.names.add(name)
        (self.out / f"{name}.out").write_bytes(data)

    def cmd(
        self,
        *args: str,
        name: str | None = None,
        env: dict[str, str] | None = None,
        home: bool = True,
        fix: object = None,
        timeout: float = TIMEOUT,
    ) -> None:
        """`rollouts [--home H [--store S]] ARGS` -> NAME.out"""
        glob = ["--home", str(self.home)] + (["--store", self.store] if self.store else []) if home else []
        argv = self.prog.argv([*glob, *args])
        key, name = (tuple(argv), tuple(sorted((env or {}).items()))), name or safe(list(args))
        if self.ran.get(name) == key:
            return  # the very same command asked for twice (e.g. two --as-of positions that coincide)
        self.ran[name] = key
        try:
            done = subprocess.run(
                argv,
                cwd=self.tmp / "work",
                env=self.prog.env({**self.extra, **(env or {})}),
                capture_output=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
            data = done.stdout + b"--- stderr ---\n" + done.stderr + f"--- exit {done.returncode} ---\n".encode()
        except subprocess.TimeoutExpired as late:
            data = (late.stdout or b"") + b"--- stderr ---\n" + (late.stderr or b"") + b"--- timeout ---\n"
        data = self.normalise(data)
        if callable(fix):
            data = fix(data)
        self.write(name, data)

    def both(self, *args: str, **kw: object) -> None:
        """ARGS in the default (table) and -o json."""
        self.cmd(*args, **kw)  # type: ignore[arg-type]
        self.cmd(*args, "-o", "json", **kw)  # type: ignore[arg-type]


def checkpoint_fix(data: bytes) -> bytes:
    """N4: `log checkpoint` signs the wall-clock time; keep all but that time and the signature."""
    data = re.sub(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", b"<NOW>", data)
    data = re.sub(rb"(\xe2\x80\x94 golden )[A-Za-z0-9+/=]+", rb"\1<SIGNATURE>", data)  # text form
    return re.sub(rb"(\\u2014 golden )[A-Za-z0-9+/=]+", rb"\1<SIGNATURE>", data)  # inside the JSON form


def read_commands(d: Dumper, meta: dict, tmp: Path, full: bool = True) -> None:
    """Every read command, on one home. `full=False` (the PostgreSQL home, whose views are the same
    local SQLite files) leaves out the per-revision and per-type sweeps but for two configs/types."""
    configs, revisions, positions, times = meta["configs"], meta["revisions"], meta["positions"], meta["times"]
    head, head_hash = meta["head"], meta["head_hash"]
    mid = positions[len(positions) // 2]
    d.both("projections", "status")  # first: shows the views as the build left them
    d.both("config", "list")
    for c in configs + ["nosuch"]:
        d.both("config", "show", c)
        d.both("rollout", "status", c)
        d.both("rollout", "history", c)
        d.both("events", c)
        d.both("audit", c)
        d.both("logs", c)
    for c in configs:
        own, own_time = str(meta["asof"][c]), meta["asof_time"][c]  # the middle of the config's own history
        d.both("config", "show", c, "--as-of", own)
        d.both("rollout", "status", c, "--as-of", own)
        d.both("rollout", "history", c, "--as-of", own)
        d.both("config", "show", c, "--as-of", own_time)
        d.both("rollout", "status", c, "--as-of", own_time)
        d.both("rollout", "history", c, "--as-of", own_time)
        if full or c in ("shop", "web"):
            for r in revisions[c]:
                d.both("rollout", "history", c, "--revision", str(r))
                d.cmd("events", c, "--revision", str(r), "-o", "json")
                d.both("logs", c, "--revision", str(r))
        last = revisions[c][-1] if revisions[c] else None
        if last is not None:
            d.cmd("rollout", "status", c, "--watch", "--timeout", "1")
            if c not in meta["open"]:  # -f on an open deployment would follow it for ever
                d.cmd("logs", c, "--follow", "--revision", str(last), timeout=30)
    first = "web" if "web" in configs else configs[0]
    for p in positions:
        d.both("config", "show", first, "--as-of", str(p))
        d.both("rollout", "history", first, "--as-of", str(p))
    for t in times:
        d.both("config", "show", first, "--as-of", t)
        d.both("rollout", "status", first, "--as-of", t)
    d.both("rollout", "history", first, "--revision", "2", "--as-of", str(mid))
    d.both("rollout", "history", first, "--revision", "99")
    d.both("events", first, "--revision", "99")
    d.both("logs", first, "--revision", "99")
    d.both("rollout", "history", first, "--as-of", "0")
    d.both("rollout", "status", first, "--as-of", "1999-01-01T00:00:00")
    d.both("rollout", "history", first, "--as-of", str(head + 100))
    d.both("rollout", "history", first, "--as-of", "not-a-time")
    # events: all, filtered, paged
    d.both("events")
    for t in meta["types"] if full else ["RolloutTriggered", "DeployerClaimed"]:
        d.cmd("events", "--type", t, "-o", "json")
    for t in ("Created", "MeasurementRecorded", "Frozen"):
        d.cmd("events", "--type", t)
    d.both("events", "--type", "NoSuchType")
    d.both("events", "--actor", "bob@laptop")
    d.both("events", "--actor", "controller@host-a", "--limit", "7")
    d.both("events", "--since", times[1])
    d.both("events", "--since", times[0], "--until", str(mid))
    d.both("events", "--after", str(mid))
    d.both("events", "--until", str(mid))
    d.both("events", "--after", str(positions[1]), "--until", str(mid), "--limit", "5")
    d.both("events", "--limit", "3")
    d.both("events", "--after", str(head))
    d.both("events", "--after", str(head + 5))
    d.both("events", "--until", "2", "--after", "5")
    d.both("events", configs[0], "--type", "DeployerClaimed", "--after", "3", "--limit", "2")
    d.both("events", "--revision", "1")
    # audit, log
    d.both("audit")
    d.both("log", "verify")
    d.both("log", "verify", "--expect-head", f"{head}:{head_hash}")
    d.both("log", "verify", "--expect-head", f"{mid}:{head_hash}")
    d.both("log", "verify", "--expect-head", f"{head + 1}:{head_hash}")
    for key in ("pub.pem", "key.pem"):  # the right public key; a private key where the public one belongs
        args = ["log", "verify", "--checkpoint", str(tmp / meta["checkpoint"]), "--pubkey", str(tmp / "files" / key)]
        d.cmd(*args, name=f"log_verify_--checkpoint_--pubkey_{key}")
        d.cmd(*args, "-o", "json", name=f"log_verify_--checkpoint_--pubkey_{key}_-o_json")
    d.cmd("log", "export")
    d.cmd("log", "export", "--after", str(mid))
    d.cmd("log", "export", "--until", str(mid))
    d.cmd("log", "export", "--after", str(positions[1]), "--until", str(mid))
    d.cmd("log", "export", "--after", str(head))
    checkpoint = ["log", "checkpoint", "--key", str(tmp / "files" / "key.pem"), "--name", "golden"]
    d.cmd(*checkpoint, name="log_checkpoint_--key_--name_golden", fix=checkpoint_fix)
    d.cmd(*checkpoint, "-o", "json", name="log_checkpoint_--key_--name_golden_-o_json", fix=checkpoint_fix)
    # views
    for v in ("desired", "history", "audit"):
        d.both("projections", "diff", v)
    d.both("projections", "diff", "desired", "history", "audit")
    d.both("projections", "diff", "nosuch")
    # deployers, notifications, claims, home
    d.both("deployers", "list")
    d.both("deployers", "list", "--all")
    d.both("notify", "list")
    d.both("notify", "status")
    for claim in meta["claims"]:
        d.both("claim", "check", claim)
        d.cmd("claim", "check", name=safe(["claim", "check", "from-env", claim]), env={"ROLLOUT_CLAIM": claim})
    d.both("claim", "check", f"{meta['log_id']}:{head + 50}")
    d.both("claim", "check", "not-a-claim")
    d.cmd("claim", "check")
    d.cmd("home", "rebind", "--dry-run")
    # shell completion reads the home too (click's protocol)
    prefix = ["rollouts", "--home", str(d.home)] + (["--store", d.store] if d.store else [])
    for words, cword in (
        ("rollouts config show ", 3),
        ("rollouts rollout history s", 3),
        ("rollouts deployers delete ", 3),
        ("rollouts projections diff ", 3),
        ("rollouts logs ", 2),
        ("rollouts notify remove ", 3),
        ("rollouts rollout ", 2),
        ("rollouts events --type ", 3),
        ("rollouts --", 1),
    ):
        d.cmd(
            name=safe(["complete", *words.split(), f"_{cword}"]),
            home=False,
            env={
                "_ROLLOUTS_COMPLETE": "bash_complete",
                "COMP_WORDS": " ".join(prefix) + words[len("rollouts") :],
                "COMP_CWORD": str(cword + len(prefix) - 1),
            },
        )


def global_commands(d: Dumper, tmp: Path) -> None:
    """What reads no home: help (recursive), version, usage errors, a missing home."""
    d.cmd(name="rollouts", home=False)  # alone: its help on stdout
    d.cmd("--version", home=False)
    d.cmd("-h", home=False)
    d.cmd("nosuchcommand", home=False)
    seen: set[tuple[str, ...]] = set()

    def walk(path: tuple[str, ...]) -> None:
        if path in seen:
            return
        seen.add(path)
        argv = d.prog.argv([*path, "--help"])
        done = subprocess.run(argv, cwd=tmp / "work", env=d.prog.env(), capture_output=True, timeout=TIMEOUT)
        data = done.stdout + b"--- stderr ---\n" + done.stderr + f"--- exit {done.returncode} ---\n".encode()
        d.write(safe(["help", *path]), d.normalise(data))
        text = done.stdout.decode()
        if "\nCommands:\n" in text:
            if path:  # a group without its verb: its help on stderr, exit 2 (never a leaf: that would run it)
                d.cmd(*path, name=safe(["bare", *path]), home=False)
            for line in text.split("\nCommands:\n", 1)[1].splitlines():
                m = re.match(r"^  (\S+)", line)
                if m:
                    walk((*path, m.group(1)))

    walk(())
    for shell in ("bash", "zsh", "fish"):
        d.cmd(name=f"complete_source_{shell}", home=False, env={"_ROLLOUTS_COMPLETE": f"{shell}_source"})
    missing = str(tmp / "no-such-home")
    for args in (
        ("config", "list"),
        ("rollout", "status", "web"),
        ("events",),
        ("log", "verify"),
        ("log", "export"),
        ("audit",),
        ("projections", "status"),
        ("deployers", "list"),
        ("notify", "list"),
    ):
        d.cmd("--home", missing, *args, name=safe(["missing-home", *args]), home=False)
    d.cmd("--home", "", "config", "list", name="empty-home_config_list", home=False)
    d.cmd("--home", str(tmp / "golden.json"), "config", "list", name="file-home_config_list", home=False)
    d.cmd("serve", "--host", "0.0.0.0", "--port", "0", name="serve_off_loopback_refused", home=False, timeout=20)
    d.cmd("events", "--limit", "0", name="events_limit_0", home=False)
    d.cmd("events", "--after", "x", name="events_after_x", home=False)
    d.cmd("--as", " ", "config", "list", name="blank_actor_config_list", home=False)
    d.cmd(
        "--store",
        "postgresql://u@h/db?sslmode=require&sslmode=disable",
        "config",
        "list",
        name="store_repeated_param",
        home=False,
    )
    d.cmd("--store", "postgresql://u@h/db?nosuch=1", "config", "list", name="store_unknown_param", home=False)


def source_commands(d: Dumper, meta: dict) -> None:
    """A few reads of the sealed source home."""
    d.both("config", "list")
    for c in meta["configs"]:
        d.both("rollout", "history", c)
        d.both("rollout", "status", c)
        d.both("config", "show", c)
    d.both("events")
    d.both("audit")
    d.both("log", "verify")
    d.cmd("log", "export")
    d.both("projections", "status")
    d.both("deployers", "list", "--all")
    d.both("notify", "status")
    d.cmd("home", "rebind", "--dry-run")


# -- serve ------------------------------------------------------------------------------------------


def routes(meta: dict) -> list[tuple[str, str, dict[str, str]]]:
    """(method, target, extra headers) of every request: every route of adapters/web/routes.py, its
    parameters, and the refusals (404, 400, 405, 421)."""
    configs, revisions, head = meta["configs"], meta["revisions"], meta["head"]
    times, positions = meta["times"], meta["positions"]
    mid = positions[len(positions) // 2]
    first = "web" if "web" in configs else configs[0]
    got: list[tuple[str, str, dict[str, str]]] = []
    add = lambda target, method="GET", **h: got.append((method, target, h))  # noqa: E731
    add("/")
    add("/", "HEAD")
    add("/?x=1")
    add("/index.html")
    for c in configs:
        add(f"/configs/{c}")
        add(f"/api/configs/{c}/history")
        for r in revisions[c]:
            add(f"/api/configs/{c}/history?revision={r}")
        add(f"/configs/{c}?version={revisions[c][0]}" if revisions[c] else f"/configs/{c}?version=1")
    add(f"/configs/{first}?type=DeployerClaimed")
    add(f"/configs/{first}?limit=3")
    add(f"/configs/{first}?limit=3&after=5")
    add(f"/configs/{first}?actor=bob%40laptop")
    add(f"/configs/{first}?since={quote(times[0])}")
    add(f"/configs/{first}?until={mid}")
    add(f"/configs/{first}?type=&version=&actor=&since=&after=&until=&limit=")  # an empty form
    add(f"/configs/{first}?type=Nope")
    add(f"/configs/{first}?limit=0")
    add(f"/configs/{first}?revision=1")
    add(f"/configs/{first}/")
    add("/configs/nosuch")
    add("/configs/Bad_Name")
    add("/configs/..%2F..%2Fetc%2Fpasswd")
    add("/configs/")
    add("/configs")
    add("/api/configs")
    add("/api/configs", "HEAD")
    add("/api/configs?x=1")
    add("/api/configs/nosuch/history")
    add("/api/configs/Bad_Name/history")
    add(f"/api/configs/{first}/history?revision=99")
    add(f"/api/configs/{first}/history?revision=0")
    add(f"/api/configs/{first}/history?revision=abc")
    add(f"/api/configs/{first}/history?x=1")
    add(f"/api/configs/{first}")
    add("/api/events")
    add(f"/api/events?config={first}")
    add(f"/api/events?config={first}&version=2")
    add("/api/events?type=DeployerClaimed")
    add("/api/events?type=RolloutTriggered&limit=2")
    add("/api/events?limit=5")
    add(f"/api/events?after={mid}&limit=5")
    add(f"/api/events?after={mid}")
    add(f"/api/events?until={mid}")
    add(f"/api/events?after=3&until={mid}&limit=4")
    add("/api/events?actor=bob%40laptop")
    add(f"/api/events?since={quote(times[1])}")
    add("/api/events?since=yesterday")
    add("/api/events?version=1")
    add("/api/events?limit=0")
    add("/api/events?limit=abc")
    add("/api/events?type=Nope")
    add(f"/api/events?after={head + 1}")
    add("/api/events?until=2&after=5")
    add("/api/events?config=Bad_Name")
    add(f"/api/events?config={first}&config={first}")
    add("/api/events?nope=1")
    add("/api/events?" + "&".join(f"p{i}=1" for i in range(25)))
    add("/api/nope")
    add("/api")
    add("/metrics")
    add("/metrics")  # again: made only when something moved
    add("/metrics", "HEAD")
    add("/metrics?x=1")
    add("/nope")
    add("/static/style.css")
    add("/favicon.ico")
    add("/robots.txt")
    add("/%")
    add("//")
    add("/api/configs", "POST")
    add("/api/configs", "DELETE")
    add("/", "PUT")
    add("/", "OPTIONS")
    add("/api/configs", Host="attacker.example")
    add("/api/configs", Host="attacker.example:80")
    add("/api/configs", Host="localhost")
    add("/api/configs", Host="[::1]")
    add("/api/configs", Host="127.0.0.2")
    add("/api/configs", Host="")
    return got


def fetch(port: int, method: str, target: str, headers: dict[str, str]) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        hdrs = {"Host": "127.0.0.1", **headers}
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for k, v in hdrs.items():
            conn.putheader(k, v)
        conn.endheaders()
        resp = conn.getresponse()
        body = resp.read()
        lines = [f"HTTP {resp.status} {resp.reason}"]
        # N3: Date and Server are left out.
        lines += [f"{k}: {v}" for k, v in resp.getheaders() if k.lower() not in ("date", "server")]
        return ("\n".join(lines) + "\n\n").encode() + body
    except Exception as error:  # noqa: BLE001 - recorded, compared like any answer
        return f"--- request failed: {type(error).__name__}: {error} ---\n".encode()
    finally:
        conn.close()


def serve(
    d: Dumper,
    meta: dict,
    tag: str,
    extra: list[str],
    env: dict[str, str],
    requests: list[tuple[str, str, dict[str, str]]],
) -> None:
    """`rollouts serve --port 0 EXTRA` on the home; each request -> http_<tag>_<n>_<target>.out; the
    server's own output -> serve_<tag>.out."""
    glob = ["--home", str(d.home)] + (["--store", d.store] if d.store else [])
    proc = subprocess.Popen(
        d.prog.argv([*glob, "serve", "--port", "0", *extra]),
        cwd=d.tmp / "work",
        env=d.prog.env({**d.extra, **env}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    m = re.match(r"http://127\.0\.0\.1:(\d+)/\s*$", line)
    if not m:
        proc.kill()
        out, err = proc.communicate()
        d.write(f"serve_{tag}", d.normalise(line.encode() + out + b"--- stderr ---\n" + err + b"--- no URL ---\n"))
        return
    port = int(m.group(1))
    for n, (method, target, headers) in enumerate(requests):
        label = "_".join([method, target] + [f"{k}={v}" for k, v in headers.items()])
        d.write(safe([f"http_{tag}", f"{n:03d}", label]), d.normalise(fetch(port, method, target, headers)))
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=30)
        code = f"--- exit {proc.returncode} ---\n"
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        code = "--- did not stop on SIGTERM ---\n"
    data = line.encode() + out + b"--- stderr ---\n" + err + code.encode()
    data = d.normalise(data).replace(f":{port}/".encode(), b":<PORT>/")  # N2
    d.write(f"serve_{tag}", data)


def serve_all(d: Dumper, meta: dict) -> None:
    serve(d, meta, "plain", [], {}, routes(meta))
    token_requests = [
        ("GET", "/api/configs", {}),
        ("GET", "/metrics", {}),
        ("GET", "/api/configs", {"Authorization": "Bearer wrong"}),
        ("GET", "/api/configs", {"Authorization": f"Basic {TOKEN}"}),
        ("GET", "/api/configs", {"Authorization": f"Bearer {TOKEN}"}),
        ("GET", "/metrics", {"Authorization": f"bearer {TOKEN}"}),
        ("GET", "/", {"Authorization": f"Bearer {TOKEN}"}),
        ("GET", "/api/configs", {"Authorization": f"Bearer {TOKEN}", "Host": "attacker.example"}),
    ]
    serve(d, meta, "token", ["--token-env", TOKEN_ENV], {TOKEN_ENV: TOKEN}, token_requests)
    serve(d, meta, "token-unset", ["--token-env", "GOLDEN_UNSET"], {}, [("GET", "/api/configs", {})])


# -- the PostgreSQL store's fingerprint ---------------------------------------------------------------


def pg_fingerprint(store: str) -> str:
    """md5 of every table of the store's schema, one line each (psql: the dump must not write there)."""
    schema = parse_qs(urlsplit(store).query)["schema"][0]

    def psql(sql: str) -> str:
        return subprocess.run(
            ["psql", PSQL_URL, "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql],
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    tables = psql(
        f"SELECT table_name FROM information_schema.tables WHERE table_schema = '{schema}' "
        "AND table_type = 'BASE TABLE' ORDER BY table_name"
    ).split()
    lines = []
    for t in tables:
        q = f'"{schema}"."{t}"'
        lines.append(
            f"{t} "
            + psql(
                f"SELECT count(*) || ' ' || coalesce(md5(string_agg(x::text, E'\\n' ORDER BY x::text)), '-') FROM {q} x"
            ).strip()
        )
    return "\n".join(lines) + "\n"


# -- dump, compare ----------------------------------------------------------------------------------


def dump(prog: Program, bundle: Path, out: Path, jobs: int) -> None:
    started = time.monotonic()
    meta = json.loads((bundle / "golden.json").read_text())
    say(f"dumping with rollouts from {prog.which()}")
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="golden-dump-"))
    try:
        shutil.copytree(bundle, tmp / "b", symlinks=True)
        root = tmp / "b"
        sqlite = Dumper(prog, root, root / "sqlite", None, out)
        tasks = [
            lambda: (read_commands(sqlite, meta["sqlite"], root), serve_all(sqlite, meta["sqlite"])),
            lambda: global_commands(Dumper(prog, root, root / "none", None, out / "global"), root),
            lambda: source_commands(Dumper(prog, root, root / "source", None, out / "source"), meta["source"]),
        ]
        fingerprint = None
        if "pg" in meta:
            pgm = meta["pg"]
            fingerprint = pg_fingerprint(pgm["store"])
            pgd = Dumper(prog, root, root / "pg", pgm["store"], out / "pg")
            tasks.insert(0, lambda: (read_commands(pgd, pgm, root, full=False), serve_all(pgd, pgm)))
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            for f in [pool.submit(t) for t in tasks]:
                f.result()
        if fingerprint is not None:
            after = pg_fingerprint(meta["pg"]["store"])
            verdict = "unchanged by the dump\n" if after == fingerprint else f"CHANGED by the dump; after:\n{after}"
            (out / "pg" / "_store_fingerprint.out").write_text(fingerprint + "--- after the dump ---\n" + verdict)
            if after != fingerprint:
                say("WARNING: the dump wrote to the PostgreSQL store: later dumps will differ; rebuild the bundle")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    count = sum(1 for _ in out.rglob("*.out"))
    say(f"dumped {count} files into {out} in {time.monotonic() - started:.0f} s")


def compare(a: Path, b: Path) -> int:
    files_a = {p.relative_to(a) for p in a.rglob("*.out")}
    files_b = {p.relative_to(b) for p in b.rglob("*.out")}
    differ = 0
    for rel in sorted(files_a | files_b):
        pa, pb = a / rel, b / rel
        if rel not in files_b or rel not in files_a:
            differ += 1
            print(f"only in {a if rel in files_a else b}: {rel}")
            continue
        da, db = pa.read_bytes(), pb.read_bytes()
        if da == db:
            continue
        differ += 1
        lines_a = da.decode(errors="backslashreplace").splitlines(keepends=True)
        lines_b = db.decode(errors="backslashreplace").splitlines(keepends=True)
        diff = list(difflib.unified_diff(lines_a, lines_b, str(pa), str(pb)))
        if not diff:  # same lines, different bytes (line endings, a missing final newline)
            diff = [f"--- {pa}\n+++ {pb}\n", f"(bytes differ: {da[-40:]!r} vs {db[-40:]!r})\n"]
        sys.stdout.writelines(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff
        )
    if differ:
        print(f"{differ} of {len(files_a | files_b)} files differ")
        return 1
    print(f"all {len(files_a)} files match")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs `-m rollouts`")
    parser.add_argument("--pythonpath", default=None, help="PYTHONPATH for it (e.g. a dir with rollouts -> old tree)")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build a bundle of homes with the given code")
    b.add_argument("home_dir", type=Path)
    b.add_argument(
        "--pg-store",
        default=DEFAULT_PG,
        help=f"PostgreSQL store for the second home (default {DEFAULT_PG}; its schema is dropped first)",
    )
    b.add_argument("--no-pg", action="store_true", help="no PostgreSQL home")
    d = sub.add_parser("dump", help="run every read command and route on a copy of the bundle")
    d.add_argument("home_dir", type=Path)
    d.add_argument("out_dir", type=Path)
    d.add_argument("--jobs", type=int, default=4, help="homes dumped at once (each one's commands run in order)")
    c = sub.add_parser("compare", help="diff two dumps")
    c.add_argument("out_a", type=Path)
    c.add_argument("out_b", type=Path)
    args = parser.parse_args()
    prog = Program(args.python, args.pythonpath)
    if args.command == "build":
        build(prog, args.home_dir.resolve(), None if args.no_pg else args.pg_store)
        return 0
    if args.command == "dump":
        dump(prog, args.home_dir.resolve(), args.out_dir.resolve(), args.jobs)
        return 0
    return compare(args.out_a, args.out_b)


if __name__ == "__main__":
    sys.exit(main())
