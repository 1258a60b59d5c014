"""The chaos runner's template checks (bench/chaos/templates.py) on hand-made logs and runtime rows: a claim
that fixed a revision other than the log's at that point, or left out a template its spec names; a
measurement (runtime row or ground-truth line) that ran another revision than its claim fixed."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the checkout, where `bench` is
from bench.chaos.model import Verdict  # noqa: E402
from bench.chaos.templates import Templates  # noqa: E402

POSITION = iter(range(1, 10_000))


def ev(kind: str, config: str | None, version: int | None, stream: str = "web", **data: Any) -> dict[str, Any]:
    return {
        "position": next(POSITION),
        "type": kind,
        "config": config,
        "version": version,
        "stream": stream,
        "data": data,
    }


def template(kind: str, name: str = "prom") -> dict[str, Any]:
    return ev(kind, None, None, stream=f"t-{name}", **({"template": name} if kind == "Created" else {}))


def deployment(version: int, *fixed: tuple[str, int], names: tuple[str, ...] = ("prom",)) -> list[dict[str, Any]]:
    analysis = [{"template": t, "version": v} for t, v in fixed]
    return [
        ev("Created", "web", version, spec={"analysis": list(names)}),
        ev("DeployerClaimed", "web", version, attempt=1, **({"analysis": analysis} if analysis else {})),
    ]


class Runner(Templates):
    """A chaos run reduced to what the template checks read: its rows, its ground truth, its counts."""

    def __init__(self, rows: list[dict[str, Any]], gt: Path) -> None:
        self.args = SimpleNamespace(templates=True)
        self.counts: Counter[str] = Counter()
        self.gt = gt
        self.rows = rows

    def runtime_rows(self, where: str = "") -> list[dict[str, Any]]:
        return self.rows


def row(version: int, ran: str, built_in: bool = True, **more: Any) -> dict[str, Any]:
    env = {"ROLLOUT_ANALYSIS_TEMPLATE": ran, **({"ROLLOUT_ANALYSIS": "{}"} if built_in else {})}
    name = f"web-{version}-verify-1-1"
    return {"name": name, "config": "web", "revision": version, "attempt": 1, "env": json.dumps(env), **more}


def found(events: list[dict[str, Any]], rows: list[dict[str, Any]], gt: Path) -> dict[str, list[Any]]:
    verdict = Verdict()
    Runner(rows, gt).check_templates(verdict, events)
    return dict(verdict.details)


LOG = [template("Created"), *deployment(1, ("prom", 1)), template("Changed"), *deployment(2, ("prom", 2))]


def test_claims_fixing_the_revision_in_force_and_runs_of_it_are_clean(tmp_path: Path) -> None:
    assert found(LOG, [row(1, "prom@1"), row(2, "prom@2")], tmp_path / "gt") == {}


def test_a_claim_that_fixed_an_older_revision_or_left_a_template_out_is_stale(tmp_path: Path) -> None:
    stale = [*LOG, template("Changed"), *deployment(3, ("prom", 2))]
    assert [f["claim"] for f in found(stale, [], tmp_path / "gt")["template_claim_stale"]] == [("web", 3, 1)]
    left_out = [*LOG, *deployment(3, names=("prom",))]
    assert found(left_out, [], tmp_path / "gt")["template_claim_stale"][0]["fixed"] == {}


def test_a_measurement_of_another_revision_than_its_claim_fixed_is_reported(tmp_path: Path) -> None:
    gt = tmp_path / "gt"
    gt.write_text("start web-2-verify-1-2 1.0 prom@1\nend web-2-verify-1-2 2.0 0\n")
    found_ = found(LOG, [row(1, "prom@2", built_in=False)], gt)["template_revision_mismatches"]
    assert [(f["attempt"], f["ran"], f["fixed"], f["by"]) for f in found_] == [
        (("web", 1, 1), "prom@2", 1, "row"),
        (("web", 2, 1), "prom@1", 2, "gt"),
    ]


def test_a_built_in_measurement_stands_in_the_ground_truth_by_its_row(tmp_path: Path) -> None:
    ended = row(1, "prom@1", started_at="2026-01-01T00:00:01+00:00", ended_at="2026-01-01T00:00:02+00:00", exit_code=1)
    command = row(2, "prom@2", built_in=False, started_at="2026-01-01T00:00:03+00:00", ended_at=None, exit_code=None)
    runs = Runner([ended, command], tmp_path / "gt").template_runs()
    assert [(r["name"], r["end"] - r["start"], r["rc"]) for r in runs] == [("web-1-verify-1-1", 1.0, 1)]


def test_a_templates_own_events_call_for_no_notification() -> None:
    """A template's stream has Created like a deployment's, but no config: nothing to notify (7.9)."""
    from bench.chaos import notify

    assert notify.expected([template("Created"), template("Changed")]) == []
    assert [kind for _, kind, *_ in notify.expected(deployment(1, ("prom", 1)))] == ["triggered"]
