"""The config page's analysis charts (DESIGN 7.9), asked in-process of a home where real measurement processes
asked a real HTTP server: one chart per template of the attempt, a point per measurement coloured by its
outcome, grouped by step, the conditions written beside it (escaped), a value-less point on the axis with its
error on hover; ?version=N charts that version's attempt; the JSON API is what it was."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest

from rollouts.adapters.web import charts
from tests.conftest import Rollouts
from tests.integration.serve.test_serve_routes import Server
from tests.support.analysis_servers import Site, serving_site
from tests.support.charted import LONG, PER_STEP, charted_home, ok

pytestmark = pytest.mark.slow  # real measurement processes and a controller

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    yield from serving_site()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, site: Site) -> Rollouts:
    folder = tmp_path_factory.mktemp("charts")
    (folder / "work").mkdir()
    return charted_home(Rollouts(folder / "home", folder / "work"), site.address)


@pytest.fixture(scope="module")
def server(home: Rollouts) -> Iterator[Server]:
    served = Server(home)
    yield served
    served.state.close()


def drawn(server: Server, target: str) -> dict[str, ET.Element]:
    """The page's charts, by template (NAME@REVISION), parsed as the XML they are."""
    response = server.get(target)
    assert response.status == 200, response.body[:300]
    page = response.body.decode()
    found = re.findall(r'<svg xmlns="http://www.w3.org/2000/svg" class="chart".*?</svg>', page, re.S)
    return {svg.get("data-template", ""): svg for svg in (ET.fromstring(text) for text in found)}


def points(chart: ET.Element) -> list[dict[str, str]]:
    return [
        {**p.attrib, "tip": p.findtext(f"{SVG}title") or ""}
        for p in chart.iter(f"{SVG}circle")
        if "point" in p.get("class", "").split()
    ]


def texts(chart: ET.Element, kind: str) -> list[str]:
    """What each <text> of that class shows (its <title>, on hover, aside)."""
    shown = chart.iter(f"{SVG}text")
    return [(t.text or "") + "".join(c.tail or "" for c in t) for t in shown if t.get("class") == kind]


def test_a_chart_per_template_a_point_per_measurement_by_step_and_outcome(server: Server) -> None:
    shown = drawn(server, "/configs/web?version=1")
    assert sorted(shown) == ["down@1", "latency@1", "ratio@1"]
    history = server.json("/api/configs/web/history?revision=1")[0]["verification"]["measurements"]
    for template, chart in shown.items():
        measured = [m for m in history if m["template"] == template]
        assert len(measured) == 2 * PER_STEP[template.split("@")[0]]
        found = points(chart)
        assert [(p["data-k"], p["data-step"], p["data-outcome"]) for p in found] == [
            (str(m["k"]), str(m["step"]), m["outcome"]) for m in measured
        ]
        assert all(f"outcome-{p['data-outcome']}" in p["class"].split() for p in found)
        assert texts(chart, "step") == ["step 1", "step 2"]
        xs = [float(p["cx"]) for p in found]
        assert xs == sorted(xs)
        lines = [ln for ln in chart.iter(f"{SVG}line") if ln.get("class") == "step-boundary"]
        assert len(lines) == 1
        cut = float(lines[0].get("x1", 0))
        assert all((x < cut) == (p["data-step"] == "1") for x, p in zip(xs, found, strict=True))
    assert {p["data-outcome"] for p in points(shown["latency@1"])} == {"passed"}
    assert {p["data-outcome"] for p in points(shown["ratio@1"])} == {"inconclusive"}


def test_points_without_a_number_sit_on_the_axis_with_the_error_on_hover(server: Server) -> None:
    shown = drawn(server, "/configs/web?version=1")
    down, ratio = points(shown["down@1"]), points(shown["ratio@1"])
    assert all("no-value" in p["class"].split() and p["data-value"] == "" for p in down)
    assert {p["cy"] for p in down} == {f"{charts.BOTTOM:.2f}"}
    assert all("503" in p["tip"] for p in down), down[0]["tip"]
    assert all("no-value" not in p["class"].split() and p["data-value"] == "2" for p in ratio)
    assert all(float(p["cy"]) < charts.BOTTOM for p in ratio)
    assert texts(shown["ratio@1"], "value") == ["2"]  # one value: one label


def test_the_conditions_are_written_beside_the_chart_and_escaped(server: Server) -> None:
    body = server.get("/configs/web?version=1").body.decode()
    assert "success: result &lt; 1" in body and "failure: result &gt; 5 and result &lt;" in body
    assert "result < 1" not in body and "result > 5" not in body
    shown = drawn(server, "/configs/web?version=1")
    said = texts(shown["ratio@1"], "condition")
    assert said[0] == "success: result < 1" and said[-1] == "on empty: inconclusive"
    assert " ".join(said[1:-1]) == f"failure: {LONG}"  # wrapped beside the chart, whole
    assert all(len(line) * charts.CHAR <= charts.WIDTH - charts.SIDE for line in said)
    assert texts(shown["down@1"], "condition") == ['success: result == "ok"', "on empty: inconclusive"]
    assert "success: result == &#34;ok&#34;" in body


def test_the_latest_attempt_is_charted_unless_a_version_is_asked(server: Server) -> None:
    latest = drawn(server, "/configs/web")
    assert sorted(latest) == ["cap@1", "latency@1"]
    assert [p["data-outcome"] for p in points(latest["cap@1"])] == ["failed"]
    body = server.get("/configs/web").body.decode()
    assert "version 2, attempt 1 (the latest" in body
    assert server.get("/configs/web?version=9").status == 404  # as before: the events' filter names no revision


def test_the_json_api_is_unchanged(home: Rollouts, server: Server) -> None:
    for target, command in (
        ("/api/configs/web/history", ["rollout", "history", "web"]),
        ("/api/configs/web/history?revision=1", ["rollout", "history", "web", "--revision", "1"]),
    ):
        assert server.get(target).body.decode() == ok(home.run(*command, "-o", "json")).stdout


# -- the geometry alone (no home): what a page of many steps or odd values draws -----------------------------


def measured(*values: object, steps: int = 1, template: str = "t@1") -> list[dict[str, object]]:
    each = -(-len(values) // steps)  # the values spread over `steps` steps in order
    return [
        {"k": k + 1, "step": k // each + 1, "template": template, "outcome": "passed", "value": v, "error": None}
        for k, v in enumerate(values)
    ]


def chart_of(found: list[dict[str, object]], spec: dict[str, object] | None = None) -> ET.Element:
    templates = {} if spec is None else {"t": {"revisions": {1: spec}}}
    page = charts.svg(found, templates)
    return ET.fromstring(re.findall(r"<svg.*?</svg>", page, re.S)[0])


def test_only_finite_numbers_are_drawn_above_the_axis() -> None:
    chart = chart_of(measured(1, 2.5, "NaN", [1, 2], True, None, 4e12))
    heights = {p["data-value"]: float(p["cy"]) for p in points(chart)}
    assert {v for v, y in heights.items() if y == charts.BOTTOM} == {'"NaN"', "[1, 2]", "true", ""}
    assert heights["1"] >= heights["2.5"] > heights["4000000000000.0"]  # higher values, higher up
    assert texts(chart, "value") == ["4e+12", "1"]


def test_labels_keep_to_their_room_with_many_steps_and_long_values() -> None:
    for steps in (1, 4, 10, 50, 100):
        chart = chart_of(measured(*[-123456.789 * k for k in range(100)], steps=steps))
        labels = texts(chart, "step")
        bounds = [float(s.get("x1", 0)) for s in chart.iter(f"{SVG}line") if s.get("class") == "step-boundary"]
        assert len(bounds) == steps - 1 and bounds == sorted(bounds)
        edges = [charts.LEFT, *bounds, charts.LEFT + charts.PLOT]
        rooms = [right - left for left, right in zip(edges, edges[1:], strict=False)]
        assert all(len(t) * charts.CHAR <= room for t, room in zip(labels, rooms, strict=True))
        assert all(len(t) * charts.CHAR <= charts.LEFT - 8 for t in texts(chart, "value"))
    assert texts(chart_of(measured(1, 2, 3, steps=3)), "step") == ["step 1", "step 2", "step 3"]


def test_a_condition_too_long_is_cut_with_the_whole_on_hover_and_no_template_says_so() -> None:
    rule = " and ".join(f"result != {n}" for n in range(60))
    chart = chart_of(measured(1), {"provider": "http", "success": rule})
    said = [t for t in chart.iter(f"{SVG}text") if t.get("class") == "condition"]
    assert len(said) == charts.LINES and texts(chart, "condition")[-1] == "on empty: inconclusive"
    assert texts(chart, "condition")[-2].endswith("…") and said[-2].findtext(f"{SVG}title") == f"success: {rule}"
    assert texts(chart_of(measured(1), {"provider": "http"}), "condition")[0] == "no condition: passed on any 2xx"
    unknown = texts(chart_of(measured(1)), "condition")
    assert " ".join(unknown) == "this revision of the template is not in the log"
