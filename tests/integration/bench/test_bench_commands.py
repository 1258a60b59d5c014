"""Every `python bench/...` command the README, docs/ and bench/RESULTS.md name exists and answers `--help`."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "RESULTS.md"]
COMMAND = re.compile(r"\bpython3? (bench/[\w/]+\.py)\b")
NAMED = re.compile(r"(?<![\w/.-])(bench/[\w/]+\.py)\b")


def commands(text: str) -> set[str]:
    """The scripts a page runs as `python bench/...py` (each a path from the checkout's root)."""
    return set(COMMAND.findall(text))


def named(text: str) -> set[str]:
    """Every `bench/...py` path a page names, run or only mentioned."""
    return set(NAMED.findall(text))


def every(find: Callable[[str], set[str]]) -> dict[str, list[str]]:
    """Script -> the pages where `find` (`commands` or `named`) sees it."""
    found: dict[str, list[str]] = {}
    for page in PAGES:
        for script in find(page.read_text()):
            found.setdefault(script, []).append(page.relative_to(ROOT).as_posix())
    return found


def test_the_pages_name_the_figures_runner_and_the_fault_runs() -> None:
    assert {"bench/run.py", "bench/chaos/run.py", "bench/performance/rebuild.py"} <= set(every(commands))
    assert "bench/nemesis/run.py" in every(named)


def test_commands_and_names_are_found_in_prose_code_and_tables() -> None:
    text = "`python bench/run.py --json` | (`python bench/shared/cpu_of.py -- python bench/chaos/run.py ...`) |"
    assert commands(text) == {"bench/run.py", "bench/shared/cpu_of.py", "bench/chaos/run.py"}
    assert named("see bench/nemesis/run.py, not /tmp/cli-bench/exp.py") == {"bench/nemesis/run.py"}


def test_every_script_a_page_names_exists() -> None:
    missing = {script: pages for script, pages in every(named).items() if not (ROOT / script).is_file()}
    assert not missing, missing


@pytest.mark.slow  # one real process per script
def test_every_command_a_page_runs_answers_help_with_exit_0() -> None:
    def help_of(script: str) -> tuple[str, int, str]:
        # From another folder than the checkout: a script run by path finds its own package.
        done = subprocess.run(
            [sys.executable, str(ROOT / script), "--help"], cwd="/", capture_output=True, text=True, timeout=120
        )
        return script, done.returncode, done.stderr[-600:]

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(help_of, sorted(every(commands))))
    failed = [(script, code, err) for script, code, err in answers if code != 0]
    assert not failed, failed
