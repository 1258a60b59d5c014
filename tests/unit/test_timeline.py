"""The timeline SVG: one bar per attempt, placed by time, coloured and labelled by outcome, escaped."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from xml.etree import ElementTree

from rollouts.adapters.web.timeline import MIN_BAR, svg
from rollouts.projections.attempt_queries import Attempt

SVG = "{http://www.w3.org/2000/svg}"


def bars(text: str) -> list[dict[str, str]]:
    return [rect.attrib for rect in ElementTree.fromstring(text).iter(f"{SVG}rect")]


def at(seconds: float) -> str:
    return datetime.fromtimestamp(1_800_000_000 + seconds, UTC).isoformat()


def test_each_attempt_is_one_bar_in_time_order_with_its_outcome() -> None:
    attempts = [
        Attempt(1, 1, at(0), 3, at(10), 9, "complete"),
        Attempt(2, 1, at(12), 14, at(13), 18, "failed", "exit code 1"),
        Attempt(2, 2, at(20), 21, at(40), 30, "complete"),
    ]
    found = bars(svg(attempts, datetime.fromtimestamp(1_800_000_100, UTC)))
    assert [(b["data-version"], b["data-attempt"], b["data-outcome"]) for b in found] == [
        ("1", "1", "complete"),
        ("2", "1", "failed"),
        ("2", "2", "complete"),
    ]
    assert [b["class"].split()[1] for b in found] == ["outcome-complete", "outcome-failed", "outcome-complete"]
    spans = [(float(b["x"]), float(b["x"]) + float(b["width"])) for b in found]
    assert spans[0][0] < spans[0][1] < spans[1][0] < spans[1][1] < spans[2][0] < spans[2][1]
    # 40 s over the drawing width: the first bar is a quarter of it
    assert abs((spans[0][1] - spans[0][0]) / (spans[2][1] - spans[0][0]) - 0.25) < 0.01


def test_an_open_attempt_runs_until_now_and_a_short_one_stays_visible() -> None:
    attempts = [Attempt(1, 1, at(0), 3, at(0.0001), 5, "complete"), Attempt(2, 1, at(5), 7, None, 8, "open")]
    found = bars(svg(attempts, datetime.fromtimestamp(1_800_000_010, UTC)))
    assert float(found[0]["width"]) == MIN_BAR
    assert found[1]["data-end"] == "" and found[1]["data-outcome"] == "open"
    assert float(found[1]["x"]) + float(found[1]["width"]) > 900  # reaches the right edge: now


def test_text_from_the_log_is_escaped() -> None:
    text = svg([Attempt(1, 1, at(0), 1, at(1), 2, "failed", '<script>alert("x")</script>')], datetime.now(UTC))
    assert "<script>" not in text and "&lt;script&gt;" in text
    ElementTree.fromstring(text)  # still well-formed


def test_no_attempt_is_a_sentence_not_an_empty_drawing() -> None:
    assert re.search(r"No attempt", svg([], datetime.now(UTC)))
