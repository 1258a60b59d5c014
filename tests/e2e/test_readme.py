"""The README's walkthrough is real: every `$ rollouts ...` line runs and prints what it shows."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)

README = Path(__file__).resolve().parents[2] / "README.md"
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+\+00:00")
DIGEST = re.compile(r"\b[0-9a-f]{64}\b|\b[0-9a-f]{32}\b")  # hashes and log ids differ per run too


def walkthrough() -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for each prompt in the README's console blocks."""
    steps: list[tuple[str, list[str]]] = []
    in_block = False
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            in_block = line == "```console"
        elif in_block and line.startswith("$ "):
            steps.append((line[2:], []))
        elif in_block and steps:
            steps[-1][1].append(line)
    return steps


def normalise(lines: list[str]) -> list[str]:
    """Timestamps, hashes and ids differ per run; column widths follow them, so compare the cells."""
    return [" ".join(DIGEST.sub("<hex>", STAMP.sub("<time>", line)).split()) for line in lines]


def test_the_readme_walkthrough_prints_what_it_shows(tmp_path: Path) -> None:
    env = {**os.environ, "ROLLOUTS_HOME": str(tmp_path / ".rollouts"), "ROLLOUTS_ACTOR": "alice@laptop"}
    steps = walkthrough()
    assert len(steps) > 10
    for command, expected in steps:
        argv = shlex.split(command)
        assert argv[0] == "rollouts"
        proc = subprocess.run(
            [sys.executable, "-m", "adapters.cli", *argv[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        printed = (proc.stdout + proc.stderr).splitlines()
        if argv[1:] == ["projections", "status"]:  # ROWS counts the history view's duration buckets: timing
            printed, expected = without_rows(printed), without_rows(expected)
        assert normalise(printed) == normalise(expected), command


def without_rows(lines: list[str]) -> list[str]:
    """A `projections status` table without its ROWS column (the 7th)."""
    return [" ".join(cells[:6] + cells[7:]) for cells in (line.split() for line in lines)]


def test_the_readme_starts_with_the_two_fresh_machine_commands() -> None:
    text = README.read_text()
    block = text.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert block[0].endswith("pip install -e . && rollouts demo")
    assert block[1].endswith("pip install -e '.[test]' && python -m pytest -q")
    assert "python -m pytest -q" in (README.parent / ".ci" / "run").read_text()
