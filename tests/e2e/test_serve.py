"""`rollouts serve` as a real process on a home that real deployers ran in: the API equals the CLI's
`-o json`, paths outside the pages are 404, /metrics parses, SIGTERM and Ctrl-C exit 0, a restart
answers the same, and a real browser (headless Chromium) sees one bar per attempt, none overlapping."""

from __future__ import annotations

import http.client
import json
import os
import select
import shutil
import signal
import socket
import struct
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Result, Rollouts
from tests.support.analysis_servers import serving_site
from tests.support.charted import charted_home

pytestmark = pytest.mark.slow


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.stderr
    return result


def until_idle(rollouts: Rollouts) -> None:
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "60", "-q"))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Rollouts:
    """web (hooks before and after): v1 Complete; v2 Failed, then retried and Complete. api: v1 Failed."""
    folder = tmp_path_factory.mktemp("serve-e2e")
    (folder / "work").mkdir()
    rollouts = Rollouts(folder / "home", folder / "work")
    flag = folder / "fail-once"
    deployer = f"if [ -e {flag} ]; then rm {flag}; exit 1; fi"
    hooks = ["--pre-hook", "true", "--post-hook", "true"]
    ok(rollouts.sh("config", "create", "web", *hooks, "--", "sh", "-c", deployer))
    ok(rollouts.sh("config", "create", "api", "--", "false"))
    ok(rollouts.sh("rollout", "latest", "web"))
    ok(rollouts.sh("rollout", "latest", "api"))
    until_idle(rollouts)
    flag.touch()
    ok(rollouts.sh("rollout", "latest", "web"))
    until_idle(rollouts)
    ok(rollouts.sh("rollout", "retry", "web"))
    until_idle(rollouts)
    return rollouts


class Served:
    """A `rollouts serve --port 0` process (or with `port` options) and the URL it printed."""

    def __init__(
        self, rollouts: Rollouts, *, sigint_ignored: bool = False, port: tuple[str, ...] = ("--port", "0")
    ) -> None:
        # sigint_ignored: started as a script's background job is, with SIGINT ignored
        ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
        self.proc = rollouts.popen("serve", *port, preexec_fn=ignore)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        assert ready, "serve printed no URL within 30 s"
        self.url = self.proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert self.url.startswith("http://127.0.0.1:"), self.url
        self.address = urlsplit(self.url).netloc

    def get(self, path: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        """The raw path goes on the wire as it is: nothing normalises `..` on the way."""
        conn = http.client.HTTPConnection(self.address, timeout=30)
        try:
            conn.request(method, path, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str]:
        self.proc.send_signal(signum)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err


@pytest.fixture(scope="module")
def served(home: Rollouts) -> Iterator[Served]:
    server = Served(home)
    yield server
    if server.proc.poll() is None:
        code, err = server.stop()
        assert code == 0 and "Traceback" not in err, err


def test_without_port_it_listens_on_8008_as_the_contract_says(home: Rollouts) -> None:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", 8008))
        except OSError:
            pytest.skip("port 8008 is taken on this machine")
    server = Served(home, port=())
    try:
        assert server.url == "http://127.0.0.1:8008/"
        assert server.get("/api/configs")[0] == 200
    finally:
        assert server.stop()[0] == 0


@pytest.mark.parametrize(
    ("path", "command"),
    [
        ("/api/configs", ["config", "list"]),
        ("/api/configs/web/history", ["rollout", "history", "web"]),
        ("/api/events?config=web&type=DeployerClaimed", ["events", "web", "--type", "DeployerClaimed"]),
        ("/api/events?after=5&limit=7", ["events", "--after", "5", "--limit", "7"]),
    ],
)
def test_the_api_equals_the_clis_json_output(home: Rollouts, served: Served, path: str, command: list[str]) -> None:
    status, body = served.get(path)
    assert status == 200
    assert body.decode() == ok(home.sh(*command, "-o", "json")).stdout
    assert json.loads(body)


@pytest.mark.parametrize(
    "path",
    ["/../events.db", "/configs/../../events.db", "/configs/..%2F..%2Fevents.db", "/%2e%2e/%2e%2e/etc/passwd",
     "/runtime/claimant", "/api/configs/web/../../../etc/passwd", "/configs/web%00"],
)  # fmt: skip
def test_paths_outside_the_pages_are_404_over_the_wire(served: Served, path: str) -> None:
    status, body = served.get(path)
    assert status == 404 and b"root:" not in body and b"SQLite format" not in body


def test_it_answers_reads_only_and_only_to_localhost(served: Served) -> None:
    assert served.get("/api/configs", "POST")[0] == 405
    assert served.get("/api/configs", "DELETE")[0] == 405
    assert served.get("/api/configs", headers={"Host": "attacker.example:80"})[0] == 421  # DNS rebinding
    assert served.get("/api/configs", "HEAD")[0] == 200


def test_metrics_parse_and_count_each_attempt_by_outcome(served: Served) -> None:
    status, body = served.get("/metrics")
    assert status == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }
    finished = {labels: v for (name, labels), v in samples.items() if name == "rollouts_deployments_finished_total"}
    assert finished == {
        (("config", "api"), ("outcome", "complete")): 0,
        (("config", "api"), ("outcome", "failed")): 1,
        (("config", "web"), ("outcome", "complete")): 2,
        (("config", "web"), ("outcome", "failed")): 1,
    }
    assert samples[("rollouts_deployments", (("config", "web"), ("phase", "Complete")))] == 2
    assert samples[("rollouts_rollout_duration_seconds_count", ())] == 4  # web v2 ended twice (failed, then complete)
    assert samples[("rollouts_log_head_position", ())] > 0


def test_sigterm_and_ctrl_c_exit_0_and_a_restart_answers_the_same(home: Rollouts, served: Served) -> None:
    before = served.get("/api/configs/web/history")
    for signum, ignored in ((signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGINT, True)):
        again = Served(home, sigint_ignored=ignored)
        assert again.get("/api/configs/web/history") == before
        code, err = again.stop(signum)
        assert code == 0, err
        assert "Traceback" not in err and err.rstrip().endswith("stopped")


def test_clients_that_hang_up_early_leave_no_traceback(home: Rollouts) -> None:
    """A browser that stops loading or a scraper that gives up closes its socket (here with a reset,
    before or after its request is whole); socketserver printed a traceback for each."""
    server = Served(home)
    host, port = server.address.rsplit(":", 1)
    request = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    for i in range(24):
        with socket.create_connection((host, int(port)), timeout=10) as client:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
            client.sendall(request if i % 2 else request[:20])
            if i % 3 == 0:
                time.sleep(0.05)  # sometimes while the answer is being written
    assert server.get("/")[0] == 200
    code, err = server.stop()
    assert code == 0 and err.splitlines()[1:] == ["stopped"], err  # after the line that says where it serves


# -- the page, in a real browser ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium through selenium; skipped when not installed, unless ROLLOUTS_REQUIRE_BROWSER=1."""
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (pip)")
    if missing:
        why = f"no {', '.join(missing)}: install Debian's chromium and chromium-driver (as .ci/run does)"
        if os.environ.get("ROLLOUTS_REQUIRE_BROWSER") == "1":
            pytest.fail(f"a browser is required (ROLLOUTS_REQUIRE_BROWSER=1): {why}")
        pytest.skip(why)
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")  # type: ignore[assignment]
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def test_the_page_shows_one_bar_per_attempt_none_overlapping(served: Served, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(served.url)
    assert browser.title.startswith("configs")
    browser.save_screenshot(str(tmp_path / "index.png"))
    browser.find_element(By.LINK_TEXT, "web").click()
    assert urlsplit(browser.current_url).path == "/configs/web"
    bars = browser.find_elements(By.CSS_SELECTOR, "svg.timeline rect.attempt")
    seen = [
        (b.get_attribute("data-version"), b.get_attribute("data-attempt"), b.get_attribute("data-outcome"))
        for b in bars
    ]
    assert seen == [("1", "1", "complete"), ("2", "1", "failed"), ("2", "2", "complete")]
    fills = [b.value_of_css_property("fill") for b in bars]
    assert fills[0] == fills[2] != fills[1]  # coloured by outcome, as the browser draws them
    spans = [
        (datetime.fromisoformat(b.get_attribute("data-start")), datetime.fromisoformat(b.get_attribute("data-end")))
        for b in bars
    ]
    positions = [(int(b.get_attribute("data-first")), int(b.get_attribute("data-last"))) for b in bars]
    drawn = [(b.rect["x"], b.rect["x"] + b.rect["width"]) for b in bars]
    for i in range(len(bars) - 1):
        assert spans[i][0] < spans[i][1] <= spans[i + 1][0], "two attempts of one config at once (times)"
        assert positions[i][1] < positions[i + 1][0], "two attempts of one config at once (log positions)"
        assert drawn[i][1] <= drawn[i + 1][0] + 0.5, "two bars drawn over the same moment"
    rows = browser.find_elements(By.CSS_SELECTOR, "table tbody tr")
    assert any("Complete" in r.text for r in rows) and any("DeployerClaimed" in r.text for r in rows)
    browser.save_screenshot(str(tmp_path / "config-web.png"))
    assert (tmp_path / "config-web.png").stat().st_size > 10_000


def _boxes_overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and (b["y"] < a["y"] + a["height"])
    )


BOXES = """return Array.from(document.querySelectorAll(arguments[0])).map(e => {
  const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height, text: e.textContent};
});"""


def test_after_the_demo_no_text_covers_another_and_none_is_cut_at_the_edge(
    tmp_path_factory: pytest.TempPathFactory, browser: Any, tmp_path: Path
) -> None:
    """Issue 48.6: /configs/shop's timeline wrote v2's failure text over its row label ("v2.1"), and the
    history's message column ran past the window's edge."""
    folder = tmp_path_factory.mktemp("serve-demo")
    (folder / "work").mkdir()
    rollouts = Rollouts(folder / "home", folder / "work")
    ok(rollouts.sh("demo", timeout=120))
    server = Served(rollouts)
    try:
        browser.set_window_size(1400, 1000)
        for name in ("shop", "web", "api"):
            browser.get(server.url + f"configs/{name}")
            browser.save_screenshot(str(tmp_path / f"{name}.png"))
            texts = [b for b in browser.execute_script(BOXES, "svg.timeline text") if b["width"] > 0]
            assert any(b["text"] == "v2.1" for b in texts) or name != "shop"
            for i, a in enumerate(texts):
                for b in texts[i + 1 :]:
                    assert not _boxes_overlap(a, b), f"{name}: {a['text']!r} and {b['text']!r} overlap"
            cells = browser.execute_script(BOXES, "table td")
            width = browser.execute_script("return document.documentElement.clientWidth")
            assert all(c["x"] + c["width"] <= width + 1 for c in cells), f"{name}: a cell runs past the window"
            assert browser.execute_script("return document.documentElement.scrollWidth") <= width
    finally:
        assert server.stop()[0] == 0


def test_the_analysis_charts_show_each_outcome_and_no_text_covers_another(
    tmp_path_factory: pytest.TempPathFactory, browser: Any, tmp_path: Path
) -> None:
    """Issue 44: a config with templates charts each one's values by step, its conditions beside; at 1400x1000
    no label of a chart or of the timeline covers another, and none runs past its chart."""
    from selenium.webdriver.common.by import By

    folder = tmp_path_factory.mktemp("serve-charts")
    (folder / "work").mkdir()
    site = serving_site()
    rollouts = charted_home(Rollouts(folder / "home", folder / "work"), next(site).address)
    server = Served(rollouts)
    try:
        browser.set_window_size(1400, 1000)
        for target, templates in (("configs/web?version=1", 3), ("configs/web", 2)):
            browser.get(server.url + target)
            charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
            assert len(charts) == templates
            browser.save_screenshot(str(tmp_path / f"charts-{templates}.png"))
            for selector in ("svg.timeline text", "svg.chart text"):
                texts = [b for b in browser.execute_script(BOXES, selector) if b["width"] > 0]
                for i, a in enumerate(texts):
                    for b in texts[i + 1 :]:
                        assert not _boxes_overlap(a, b), f"{target}: {a['text']!r} and {b['text']!r} overlap"
            for chart in charts:
                edge = chart.rect["x"] + chart.rect["width"]
                inside = browser.execute_script(BOXES.replace("document.", "arguments[1]."), "text", chart)
                assert all(t["x"] + t["width"] <= edge + 1 for t in inside), f"{target}: a label runs past its chart"
        points = browser.find_elements(By.CSS_SELECTOR, "svg.chart circle.point")
        fills = {p.get_attribute("data-outcome"): p.value_of_css_property("fill") for p in points}
        assert set(fills) == {"passed", "failed"} and fills["passed"] != fills["failed"]
        browser.get(server.url + "configs/web?version=1")
        fills = {
            p.get_attribute("data-outcome"): p.value_of_css_property("fill")
            for p in browser.find_elements(By.CSS_SELECTOR, "svg.chart circle.point")
        }
        assert set(fills) == {"passed", "inconclusive"} and len(set(fills.values())) == 2
    finally:
        assert server.stop()[0] == 0
        next(site, None)  # the site stops


def test_the_page_shows_a_finished_step_within_2_s_without_a_reload(
    tmp_path_factory: pytest.TempPathFactory, browser: Any
) -> None:
    """Issue 48.4: the page polls the API (304 while nothing changed) and swaps in what changed."""
    folder = tmp_path_factory.mktemp("serve-live")
    (folder / "work").mkdir()
    rollouts = Rollouts(folder / "home", folder / "work")
    flag = folder / "go"
    ok(rollouts.sh("config", "create", "live", "--", "sh", "-c", f"while [ ! -e {flag} ]; do sleep 0.05; done"))
    ok(rollouts.sh("rollout", "latest", "live"))
    controller = rollouts.popen("controller", "run", "--until-idle", "--interval", "0.1", "--timeout", "60", "-q")
    server = Served(rollouts)
    try:
        browser.get(server.url + "configs/live")
        browser.execute_script("window.loadedOnce = true")  # gone if the page reloads
        shown = "return document.querySelector('main').innerText"
        deadline = time.monotonic() + 30
        while "Running" not in (text := browser.execute_script(shown)):  # the claim shown, live
            said = f"controller exit {controller.poll()}, server exit {server.proc.poll()}; the page: {text[:400]!r}"
            assert time.monotonic() < deadline, f"the page never showed the deployer running ({said})"
            time.sleep(0.1)
        flag.touch()
        finished = time.monotonic()
        while "Complete" not in browser.execute_script(shown):
            assert time.monotonic() - finished < 2.0, "the page did not show the step's end within 2 s"
            time.sleep(0.05)
        assert browser.execute_script("return window.loadedOnce") is True  # swapped in, not reloaded
    finally:
        assert server.stop()[0] == 0
        controller.communicate(timeout=60)


def test_the_index_draws_each_pipeline_as_a_row_of_stages_with_their_artifact(
    tmp_path_factory: pytest.TempPathFactory, browser: Any, tmp_path: Path
) -> None:
    """7.10: `/` draws dev -> staging -> prod as one row, each stage with its version, phase and artifact."""
    from selenium.webdriver.common.by import By

    folder = tmp_path_factory.mktemp("serve-stages")
    (folder / "work").mkdir()
    rollouts = Rollouts(folder / "home", folder / "work")
    ok(rollouts.sh("config", "create", "dev", "--env", "IMAGE=app:7", "--", "true"))
    ok(
        rollouts.sh(
            "config", "create", "staging", "--from", "dev", "--artifact", "IMAGE", "--promote", "auto", "--", "true"
        )
    )
    ok(
        rollouts.sh(
            "config", "create", "prod", "--from", "staging", "--artifact", "IMAGE", "--soak", "3600", "--", "true"
        )
    )
    ok(rollouts.sh("rollout", "latest", "dev"))
    until_idle(rollouts)
    server = Served(rollouts)
    try:
        browser.get(server.url)
        rows = browser.find_elements(By.CSS_SELECTOR, ".pipeline")
        assert [r.get_attribute("data-pipeline") for r in rows] == ["dev"]
        stages = rows[0].find_elements(By.CSS_SELECTOR, ".stage")
        assert [s.get_attribute("data-stage") for s in stages] == ["dev", "staging", "prod"]
        assert "IMAGE=app:7" in stages[0].text and "IMAGE=app:7" in stages[1].text and "Complete" in stages[1].text
        assert "soaking" in stages[2].text  # staging's revision 1 waits for prod, soaking for an hour
        boxes = [s.rect for s in stages]
        assert all(abs(b["y"] - boxes[0]["y"]) < 1 for b in boxes), "the stages are not drawn in one row"
        assert all(a["x"] + a["width"] <= b["x"] for a, b in zip(boxes, boxes[1:], strict=False)), "not in order"
        browser.save_screenshot(str(tmp_path / "pipelines.png"))
    finally:
        assert server.stop()[0] == 0
