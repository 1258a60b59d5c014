#!/usr/bin/env python
"""What the claim gates cost: claims/s with the freeze-of-all lookup and the read guard, beside the same
claims with the gates taken out (the baseline), in one run on one SQLite store each.

    python bench/performance/gates.py [--claims 400] [--rounds 3]

Each round: C configs, each with one New deployment; every deployment claimed through
adapters.controller.commands.claim (one decide() and save each), as a controller's claims are.
The baseline patches RolloutsApp.guarded_freeze_all to return None without reading or guarding.
Prints the medians and the ratio (gated/baseline) as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from rollouts.adapters.home import Home  # noqa: E402
from rollouts.adapters.service import commands  # noqa: E402
from rollouts.adapters.service.application import RolloutsApp, new_meta  # noqa: E402
from rollouts.adapters.service.bootstrap import open_app  # noqa: E402
from rollouts.domain.spec import Spec  # noqa: E402


def claims_per_second(count: int, gated: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="rollouts-gates-") as tmp:
        app = open_app(Home(Path(tmp) / "home"), None)
        real = RolloutsApp.guarded_freeze_all
        try:
            if not gated:
                RolloutsApp.guarded_freeze_all = lambda self: None  # type: ignore[method-assign,assignment]
            meta = new_meta("bench")
            for i in range(count):
                app.create_config(f"c{i}", Spec(command=["true"], trigger="config-change"), meta)
            started = time.perf_counter()
            for i in range(count):
                assert commands.claim(app, f"c{i}", 1, "bench", new_meta("bench")) is not None
            return count / (time.perf_counter() - started)
        finally:
            RolloutsApp.guarded_freeze_all = real  # type: ignore[method-assign]
            app.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--claims", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    gated, baseline = [], []
    for _ in range(args.rounds):  # interleaved: a loaded machine slows both alike
        baseline.append(claims_per_second(args.claims, gated=False))
        gated.append(claims_per_second(args.claims, gated=True))
    value, base = statistics.median(gated), statistics.median(baseline)
    print(json.dumps({"claims_per_s": round(value, 1), "baseline": round(base, 1), "ratio": round(value / base, 3)}))


if __name__ == "__main__":
    main()
