"""The chaos run's stages (bench/chaos/run.py --stages, DESIGN 7.10): the configs form pipelines of three
(chaos-0 -> chaos-1 -> chaos-2, chaos-3 -> ...), each stage taking IMAGE from the one before with `--promote
auto` (some with `--auto-rollback`); the first of each pipeline gets new IMAGE values and failures from
`config set`; `rollout latest --queue` joins the ops, and `rollout latest` of a stage is a promotion by hand.

Checks, from the log (`rollout history -o json` of every config), besides `audit` (I11 among its rules):

- promotion_artifact: a promoted deployment whose IMAGE is not its upstream revision's;
- promotion_not_eligible: a promotion of an upstream revision that was not Complete when the run ended
  (a promotion is appended only for a Complete one, which stays so), or an automatic rollback;
- promotion_twice: an automatic promotion of an upstream revision the stage was promoted from before;
- promotion_missing: after the settle, an auto stage (not paused) whose upstream has an eligible revision
  newer than any the stage was promoted from (the controllers, idle, owed it a promotion).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from bench.chaos.model import Verdict

PIPELINE = 3  # stages per pipeline
STAGE_WEIGHTS = {"queue": 12}
STAGE_VIOLATIONS = ("promotion_artifact", "promotion_not_eligible", "promotion_twice", "promotion_missing")
PROMOTION = "promotion of "
AUTOMATIC = "promoted automatically"  # the message of the controller's promotions (domain/stage.py)


class Stages:
    """A mixin of the chaos run (bench/chaos/run.py)."""

    args: Any
    rng: Any
    counts: Counter[str]

    def stage_upstream(self, index: int) -> str | None:
        """The config `chaos-INDEX` takes its artifact from, with --stages (None: the first of a pipeline)."""
        if not self.args.stages or index % PIPELINE == 0:
            return None
        return f"chaos-{index - 1}"

    def stage_options(self, index: int) -> list[str]:
        """A config's 7.10 options at `config create`: IMAGE for the first of a pipeline, else --from it."""
        if not self.args.stages:
            return []
        upstream = self.stage_upstream(index)
        if upstream is None:
            return ["--env", f"IMAGE=img-{index}-0"]
        args = ["--from", upstream, "--artifact", "IMAGE", "--promote", "auto"]
        return args + (["--auto-rollback"] if self.rng.random() < 0.5 else [])

    def stage_spec_change(self, name: str) -> list[str] | None:
        """A new artifact for the first of a pipeline, now and then (None: no stage change)."""
        if not self.args.stages or int(name.rsplit("-", 1)[1]) % PIPELINE != 0 or self.rng.random() < 0.6:
            return None
        return ["--env", f"IMAGE=img-{self.rng.randrange(1_000_000)}"]

    # -- checks -------------------------------------------------------------------------------

    def check_stages(self, verdict: Verdict, history: dict[str, list[dict[str, Any]]], configs: list[Any]) -> None:
        if not self.args.stages:
            return
        paused = {c["name"] for c in configs if c.get("paused")}
        for name, rows in history.items():
            upstream = self.stage_upstream(int(name.rsplit("-", 1)[1]))
            if upstream is None:
                continue
            ups = {r["version"]: r for r in history.get(upstream, [])}
            promoted: set[int] = set()
            for row in rows:
                self._promotion(verdict, name, row, upstream, ups, promoted)
            self.counts["superseded"] += sum(1 for r in rows if str(r.get("reason") or "").startswith("superseded by"))
            eligible = [v for v, r in ups.items() if r["phase"] == "Complete" and not _rollback(r)]
            if name not in paused and eligible and max(eligible) > max(promoted, default=0):
                verdict.add("promotion_missing", f"{name}: {upstream} v{max(eligible)} never promoted")

    def _promotion(
        self,
        verdict: Verdict,
        name: str,
        row: dict[str, Any],
        upstream: str,
        ups: dict[int, dict[str, Any]],
        promoted: set[int],
    ) -> None:
        source = row.get("promoted_from")
        if not source:
            return
        revision = source["revision"]
        automatic = row.get("message") == AUTOMATIC
        self.counts["promotions_auto" if automatic else "promotions_manual"] += 1
        up = ups.get(revision)
        where = f"{name} v{row['version']} from {upstream} v{revision}"
        if up is None or up["phase"] != "Complete" or _rollback(up) or source["config"] != upstream:
            verdict.add("promotion_not_eligible", where)
        elif (up["spec"].get("env") or {}).get("IMAGE") != (row["spec"].get("env") or {}).get("IMAGE"):
            verdict.add("promotion_artifact", where)
        if automatic and promoted and revision <= max(promoted):
            verdict.add("promotion_twice", f"{where} (after {max(promoted)})")
        promoted.add(revision)


def _rollback(row: dict[str, Any]) -> bool:
    return str(row.get("cause") or "").startswith("automatic rollback to")
