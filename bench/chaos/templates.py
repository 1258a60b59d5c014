"""The chaos run's analysis templates (bench/chaos/run.py --templates, DESIGN 7.9): a real Prometheus and a
local HTTP server whose answers the run sets, three templates (prometheus, http, command) the stepped configs
name, `analysis set` edits of them among the ops, and the checks that each measurement ran the template
revision its attempt's claim fixed.

What runs: a prometheus_client app on loopback with a gauge `chaos_health{config}`, Debian's `prometheus`
(on a free loopback port, its own data directory, scraping that app every second) and an HTTP server in a
thread answering `/health/CONFIG` with `{"value": V}`. A thread of the run flips, every 0.2-1 s, one
config's state for each server among passed (0), failed (9), inconclusive (3), empty (the series removed;
`{}`) and, for HTTP, an error reply (503). Version 1 always passes (its query multiplies by
`version > bool 1`, its URL names the version): a later failure has a Complete version to roll back to. The
command template is 7.6's seeded `sh -c` measurement (writing the ground truth like a deployer, with
$ROLLOUT_ANALYSIS_TEMPLATE on its start line), its mood an argument of the template and of each config.

Checks (all violations):

- template_claim_stale: a DeployerClaimed that fixed a template revision other than the template's
  revision at that point of the log, or did not fix every template its deployment's spec names;
- template_revision_mismatches: a measurement whose runtime row (env ROLLOUT_ANALYSIS_TEMPLATE), or whose
  ground-truth start line (command template), names a revision other than its attempt's claim fixed.

A built-in provider's measurement writes no ground truth (it is the program itself): its runtime row stands in
for it (started, ended, exit code 0 passed, 1 failed, 2 inconclusive), so the duplicates, overlaps, I9 and
measurement checks of bench/chaos/steps.py see it too.
"""

from __future__ import annotations

import contextlib
import json
import random
import shlex
import shutil
import subprocess
import threading
import time
import urllib.request
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.chaos.model import Verdict, epoch

TEMPLATE_ENV = "ROLLOUT_ANALYSIS_TEMPLATE"  # NAME@REVISION a measurement runs (service/launch.py)
BUILT_IN_ENV = "ROLLOUT_ANALYSIS"  # the resolved template of a built-in provider's measurement
STATES = {"passed": 0.0, "failed": 9.0, "inconclusive": 3.0, "empty": None}
PROM_STATES = (("passed", 67), ("failed", 28), ("inconclusive", 3), ("empty", 2))
HTTP_STATES = (("passed", 67), ("failed", 28), ("inconclusive", 2), ("empty", 1), ("error", 2))
CONDITIONS = ["--success", "result < 1", "--failure", "result > 5"]
TEMPLATE_VIOLATIONS = ("template_claim_stale", "template_revision_mismatches")
SCRAPE = """global:
  scrape_interval: 1s
scrape_configs:
  - job_name: chaos
    static_configs:
      - targets: ['127.0.0.1:{port}']
"""


def command_script(gt: Path, seed: int, sleep: float) -> str:
    """7.6's seeded measurement (bench/chaos/steps.py) as a command template: `{{args.mood}}` in its draw."""
    out = shlex.quote(str(gt))
    return (
        f'echo "start $ROLLOUT_DEPLOYER $(date +%s.%N) ${TEMPLATE_ENV}" >> {out}; sleep {sleep}; '
        f'h=$(echo "{seed} $ROLLOUT_DEPLOYER {{{{args.mood}}}} $VERIFY_MOOD" | cksum | cut -d" " -f1); '
        'p=$((h % 100)); f=${VERIFY_FAIL_PCT:-20}; [ "$ROLLOUT_VERSION" = 1 ] && f=0; i=$((f + 4)); '
        "if [ $p -lt $f ]; then rc=1; elif [ $p -lt $i ]; then rc=3; else rc=0; fi; "
        f'echo "end $ROLLOUT_DEPLOYER $(date +%s.%N) $rc" >> {out}; exit $rc'
    )


class World:
    """The servers the templates ask, and the thread that sets what they answer."""

    def __init__(self, tmp: Path, configs: list[str], seed: int) -> None:
        from prometheus_client import CollectorRegistry, Gauge, start_http_server

        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("--templates needs Debian's prometheus on PATH (apt-get install prometheus)")
        self.configs = configs
        self.rng = random.Random(seed * 7919 + 1)
        self.http_state: dict[str, str] = dict.fromkeys(configs, "passed")
        self.stopping = threading.Event()
        registry = CollectorRegistry()
        self.gauge = Gauge("chaos_health", "what the chaos run says of a config", ["config"], registry=registry)
        for name in configs:
            self.gauge.labels(config=name).set(0)
        self.app, _ = start_http_server(0, addr="127.0.0.1", registry=registry)
        work = tmp / "prometheus"
        work.mkdir()
        (work / "prometheus.yml").write_text(SCRAPE.format(port=self.app.server_port))
        port = free_port()
        self.prometheus_address = f"http://127.0.0.1:{port}"
        with (work / "prometheus.log").open("w") as log:
            self.prometheus = subprocess.Popen(
                [
                    binary,
                    f"--web.listen-address=127.0.0.1:{port}",
                    f"--storage.tsdb.path={work / 'data'}",
                    f"--config.file={work / 'prometheus.yml'}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.site = self.serve()
        self.site_address = f"http://127.0.0.1:{self.site.server_port}"
        self.wait_for_samples(work / "prometheus.log")
        self.flipper = threading.Thread(target=self.flip, daemon=True)
        self.flipper.start()

    def serve(self) -> ThreadingHTTPServer:
        world = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path, _, query = self.path.partition("?")
                state = world.http_state.get(path.rpartition("/")[2], "empty")
                state = "passed" if query == "version=1" else state
                status, body = (503, {}) if state == "error" else (200, {"value": STATES[state]})
                data = json.dumps({} if body.get("value", 0) is None else body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a measurement killed mid-request (the chaos kills them): no traceback on the run's stderr

        server = Server(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def wait_for_samples(self, log: Path) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.prometheus.poll() is not None:
                raise RuntimeError(f"prometheus exited {self.prometheus.returncode}: {log.read_text()[-1000:]}")
            with contextlib.suppress(OSError, ValueError, KeyError):
                url = f"{self.prometheus_address}/api/v1/query?query=chaos_health"
                with urllib.request.urlopen(url, timeout=5) as reply:
                    if json.load(reply)["data"]["result"]:
                        return
            time.sleep(0.3)
        raise RuntimeError(f"prometheus had no sample after 90 s: {log.read_text()[-1000:]}")

    def flip(self) -> None:
        """Every 0.2-1 s, one config's state for each server, drawn by the weights above."""
        rng = self.rng
        while not self.stopping.wait(rng.uniform(0.2, 1.0)):
            name = rng.choice(self.configs)
            prom = rng.choices([s for s, _ in PROM_STATES], [w for _, w in PROM_STATES])[0]
            if STATES[prom] is None:
                with contextlib.suppress(KeyError):
                    self.gauge.remove(name)
            else:
                self.gauge.labels(config=name).set(STATES[prom])  # type: ignore[arg-type]
            self.http_state[name] = rng.choices([s for s, _ in HTTP_STATES], [w for _, w in HTTP_STATES])[0]

    def close(self) -> None:
        self.stopping.set()
        self.prometheus.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.prometheus.wait(timeout=30)
        if self.prometheus.poll() is None:
            self.prometheus.kill()
        self.site.shutdown()
        self.app.shutdown()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Templates:
    """Analysis templates in a chaos run (a part of chaos.Chaos)."""

    world: World | None = None

    def template_argvs(self) -> list[list[str]]:
        """`analysis create` of the three templates (after the world started)."""
        assert self.world is not None
        prom = 'chaos_health{config="{{rollout.config}}"} * ({{rollout.version}} > bool 1)'
        url = f"{self.world.site_address}/health/{{{{rollout.config}}}}?version={{{{rollout.version}}}}"
        # One inconclusive measurement is let pass (an edit may set the limit to 0): pauses for a human stay rare.
        common = ["--interval", "0", "--timeout", "10", "--inconclusive-limit", "1", "--arg", "mood=0"]
        return [
            ["analysis", "create", "chaos-prom", "--provider", "prometheus", "--address",
             self.world.prometheus_address, "--query", prom, *CONDITIONS, "--count", "1", *common],
            ["analysis", "create", "chaos-http", "--provider", "http", "--url", url, "--json-path", "$.value",
             *CONDITIONS, "--count", "1", *common],
            ["analysis", "create", "chaos-cmd", "--provider", "command", "--count", "1",
             "--command", shlex.join(["sh", "-c", command_script(self.gt, self.args.seed, 0.05)]), *common],
        ]  # fmt: skip

    def start_templates(self) -> None:
        if not self.args.templates:
            return
        self.world = World(self.tmp, [f"chaos-{i}" for i in range(self.configs_count)], self.args.seed)
        for argv in self.template_argvs():
            rc, _, err = self.cli(argv, actor="chaos-templates")
            if rc != 0:
                raise RuntimeError(f"analysis create failed: {rc} {err.strip()}")

    def template_options(self) -> list[str]:
        """A stepped config's templates at `config create`: one to three of them, its own mood."""
        rng = self.rng
        names = [t for t in ("chaos-prom", "chaos-http", "chaos-cmd") if rng.random() < 0.6] or ["chaos-prom"]
        return [*(a for t in names for a in ("--analysis", t)), "--analysis-arg", f"mood={rng.randrange(100)}"]

    def template_edit(self) -> list[str]:
        """`analysis set` of one template, mid-rollout: its cadence, limits, a condition or its mood."""
        rng = self.rng
        name = rng.choice(("chaos-prom", "chaos-http", "chaos-cmd"))
        change = rng.choice(("count", "limit", "timeout", "other"))
        if change == "count":
            what = ["--count", str(rng.choice((1, 2)))]
        elif change == "limit":
            what = ["--inconclusive-limit", str(rng.choice((0, 1)))]
        elif change == "timeout":
            what = ["--timeout", str(rng.choice((8, 10, 12)))]
        elif name == "chaos-cmd" or rng.random() < 0.5:
            what = ["--arg", f"mood={rng.randrange(100)}"]
        else:
            what = ["--success", rng.choice(("result < 1", "result < 2"))]
        return ["analysis", "set", name, *what]

    def close_templates(self) -> None:
        if self.world is not None:
            with contextlib.suppress(Exception):
                self.world.close()

    # -- checks -------------------------------------------------------------------------------

    def template_runs(self) -> list[dict[str, Any]]:
        """Built-in providers' measurements as ground-truth runs, from the runtime's rows (see above)."""
        runs: list[dict[str, Any]] = []
        if not self.args.templates:
            return runs
        for row in self.runtime_rows("WHERE env IS NOT NULL AND started_at IS NOT NULL"):
            if BUILT_IN_ENV not in json.loads(row["env"]):
                continue
            end = epoch(row["ended_at"])
            run = {"name": row["name"], "start": epoch(row["started_at"]), "end": end, "gone": False}
            runs.append({**run, "rc": row["exit_code"]} if end is not None else run)
        return runs

    def check_templates(self, verdict: Verdict, events: list[dict[str, Any]]) -> None:
        if not self.args.templates:
            return
        claims = self.check_claims(verdict, events)
        checked = 0
        for row in self.runtime_rows("WHERE env IS NOT NULL"):
            ran = json.loads(row["env"]).get(TEMPLATE_ENV)
            if ran is not None:
                checked += 1
                self.hold_to_claim(verdict, claims, (row["config"], row["revision"], row["attempt"]), ran, "row")
        for line in self.gt.read_text().splitlines() if self.gt.exists() else []:
            parts = line.split()
            if len(parts) == 4 and parts[0] == "start":
                config, version, _, attempt, _ = parts[1].rsplit("-", 4)
                checked += 1
                self.hold_to_claim(verdict, claims, (config, int(version), int(attempt)), parts[3], "gt")
        self.counts["template_runs_checked"] = checked
        self.counts["template_edits"] = sum(1 for e in events if e["type"] == "Changed" and e["config"] is None)

    def check_claims(self, verdict: Verdict, events: list[dict[str, Any]]) -> dict[tuple[str, int, int], Any]:
        """Each claim's fixed revisions, held to the templates' revisions at that point of the log."""
        names: dict[str, str] = {}  # template stream -> name
        revision: dict[str, int] = defaultdict(int)
        wanted: dict[tuple[str, int], list[str]] = {}  # deployment -> the templates its spec names
        claims: dict[tuple[str, int, int], dict[str, int]] = {}
        for e in sorted(events, key=lambda e: e["position"]):
            data = e.get("data") or {}
            if e["config"] is None and e["type"] in ("Created", "Changed"):
                names.setdefault(e["stream"], data.get("template", ""))
                revision[names[e["stream"]]] += 1
            elif e["type"] == "Created" and e.get("version") is not None:
                wanted[(e["config"], e["version"])] = (data.get("spec") or {}).get("analysis") or []
            elif e["type"] == "DeployerClaimed":
                fixed = {a["template"]: int(a["version"]) for a in data.get("analysis") or []}
                key = (e["config"], e["version"], int(data["attempt"]))
                claims[key] = fixed
                now = {t: revision[t] for t in wanted.get((e["config"], e["version"]), [])}
                if fixed != now:
                    verdict.add("template_claim_stale", {"claim": key, "fixed": fixed, "log": now})
        return claims

    @staticmethod
    def hold_to_claim(
        verdict: Verdict, claims: dict[tuple[str, int, int], Any], key: tuple[str, int, int], ran: str, source: str
    ) -> None:
        template, _, version = ran.rpartition("@")
        fixed = claims.get(key, {}).get(template)
        if fixed is None or str(fixed) != version:
            verdict.add("template_revision_mismatches", {"attempt": key, "ran": ran, "fixed": fixed, "by": source})
