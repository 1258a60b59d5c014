"""The README's walkthrough and every docs page are real: each `$ rollouts ...` line runs and prints what it shows.

README.md's console blocks run in a fresh home, one after another. Each docs/*.md page with a
console block runs in a fresh home of its own, or, when the page says
`<!-- console: after the README walkthrough -->`, in a copy of the home the walkthrough left.
A prompt may set variables first (`VAR=value rollouts ...`), send stdout to a file (`> FILE`) or
through `| jq 'PATH'` (a path of `.key` and `[i]`: the test follows it itself, printing as jq does);
a transcript that needs more than that (another pipe, a hand-made edit) is a `text` block, not run. A
page that says `<!-- console: $PROM_URL is a Prometheus the test starts -->` runs with $PROM_URL naming
a real Prometheus (tests/support/analysis_servers.py) that scrapes an app whose `demo_value` is 12.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.analysis_servers import Prometheus, running_prometheus

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
AFTER_WALKTHROUGH = "<!-- console: after the README walkthrough -->"
PROMETHEUS = "<!-- console: $PROM_URL is a Prometheus the test starts -->"
JQ_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\.?\[(\d+)\]")  # .key, [i] or .[i]
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+\+00:00")
ASSIGNMENT = re.compile(r"[A-Z_][A-Z0-9_]*=.*")
DIGEST = re.compile(r"\b[0-9a-f]{64}\b|\b[0-9a-f]{32}\b")  # hashes and log ids differ per run too


def console_steps(page: Path) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for each prompt in a page's console blocks."""
    steps: list[tuple[str, list[str]]] = []
    in_block = False
    for line in page.read_text().splitlines():
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


def without_rows(lines: list[str]) -> list[str]:
    """A `projections status` table without its ROWS column (the 7th)."""
    return [" ".join(cells[:6] + cells[7:]) for cells in (line.split() for line in lines)]


def jq_path(text: str, path: str) -> list[str]:
    """What `jq PATH` prints of the JSON `text`, for a PATH of `.key` and `[i]` steps only."""
    value = json.loads(text)
    assert "".join(m.group(0) for m in JQ_STEP.finditer(path)) == path, f"not a plain jq path: {path}"
    for key, index in JQ_STEP.findall(path):
        value = value[key] if key else value[int(index)]
    return json.dumps(value, indent=2, ensure_ascii=False).splitlines()


def run_steps(page: Path, workdir: Path, more_env: dict[str, str] | None = None) -> None:
    """Run a page's prompts in WORKDIR (the home is WORKDIR/.rollouts) and compare what each prints."""
    base = {**os.environ, "ROLLOUTS_HOME": str(workdir / ".rollouts"), "ROLLOUTS_ACTOR": "alice@laptop"}
    base.update(more_env or {})
    for command, expected in console_steps(page):
        argv = shlex.split(command)
        env = dict(base)
        while argv and ASSIGNMENT.fullmatch(argv[0]):  # VAR=value rollouts ...: the command's environment
            name, _, value = argv.pop(0).partition("=")
            env[name] = value
        into, path = None, None
        if len(argv) > 3 and argv[-3:-1] == ["|", "jq"]:  # rollouts ... | jq PATH
            path, argv = argv[-1], argv[:-3]
        if len(argv) > 2 and argv[-2] == ">":  # rollouts ... > FILE: stdout into a file of the workdir
            into = workdir / argv[-1]
            argv = argv[:-2]
        assert argv[0] == "rollouts", f"{page.name}: {command}"
        proc = subprocess.run(
            [sys.executable, "-m", "rollouts", *argv[1:]],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if into is not None:
            into.write_text(proc.stdout)
        printed = ("" if into is not None else proc.stdout).splitlines() + proc.stderr.splitlines()
        if path is not None:
            printed = jq_path(proc.stdout, path) + proc.stderr.splitlines()
        if argv[1:] == ["projections", "status"]:  # ROWS counts the history view's duration buckets: timing
            printed, expected = without_rows(printed), without_rows(expected)
        assert normalise(printed) == normalise(expected), f"{page.name}: {command}"


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory whose home the README walkthrough made."""
    workdir = tmp_path_factory.mktemp("readme")
    run_steps(README, workdir)
    return workdir


def test_the_readme_walkthrough_prints_what_it_shows(walked: Path) -> None:
    assert len(console_steps(README)) > 10
    assert (walked / ".rollouts" / "events.db").exists()


def pages_with_console_blocks() -> list[Path]:
    return [page for page in sorted(DOCS.glob("*.md")) if console_steps(page)]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """A real Prometheus for the pages that ask one (skipped without it, as the provider's tests are)."""
    yield from running_prometheus(tmp_path_factory)


@pytest.mark.parametrize("page", pages_with_console_blocks(), ids=lambda page: page.name)
def test_each_docs_page_prints_what_it_shows(page: Path, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    if AFTER_WALKTHROUGH in page.read_text():
        shutil.copytree(request.getfixturevalue("walked"), workdir, symlinks=True)
    else:
        workdir.mkdir()
    more_env = {}
    if PROMETHEUS in page.read_text():
        server: Prometheus = request.getfixturevalue("prometheus")
        server.wait_for_samples("demo_value")
        more_env["PROM_URL"] = server.address
    run_steps(page, workdir, more_env)


def test_the_readme_starts_with_the_two_fresh_machine_commands() -> None:
    text = README.read_text()
    block = text.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert block[0].endswith("pip install -e . && rollouts demo")
    assert block[1].endswith("pip install -e '.[test]' && python -m pytest -q")
    assert "python -m pytest -q" in (README.parent / ".ci" / "run").read_text()
