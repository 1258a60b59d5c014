"""The lazy command tables (adapters/cli/lazy.py): each entry loads a command whose own first help line is the
one the group's `--help` prints, and a verb that appends loads without the views' modules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

from rollouts.adapters.cli import COMMANDS, cli
from rollouts.adapters.cli.lazy import Lazy
from rollouts.adapters.cli.rollout_cmds import LAZY, rollout


def test_every_command_of_the_root_table_loads() -> None:
    """(The root's lines are shorter summaries than the commands' own first lines, on purpose.)"""
    with click.Context(cli) as ctx:
        assert all(isinstance(cli.get_command(ctx, name), click.Command) for name in COMMANDS)


def test_the_rollout_groups_lazy_verbs_say_of_themselves_what_its_help_says() -> None:
    """`rollout --help` lists eager and lazy verbs alike: a lazy one's line must be its own first line."""
    table: Lazy = LAZY
    with click.Context(rollout) as ctx:
        for name, (_, _, said) in table.items():
            command = rollout.get_command(ctx, name)
            assert command is not None and command.get_short_help_str(limit=200) == said, name


def test_rollout_latest_loads_neither_the_history_queries_nor_sqlite_utils() -> None:
    code = (
        "import sys; from rollouts.adapters.cli import rollout_cmds;"
        " print(sorted(m for m in ('sqlite_utils', 'rollouts.adapters.cli.rollout_views',"
        " 'rollouts.projections.history_queries', 'rollouts.adapters.service.documents') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_rollout_history_defines_no_aggregate_and_loads_the_audits_rules_only_for_as_of() -> None:
    """A read answers from the views: the log's recorder and the views' freeze rules load without the
    aggregates' modules (each defines its events' classes as it loads; the first one ~6 ms), and the audit's
    rules (what --as-of TIME asks of the audit view) load when --as-of is given. The `rollout` group's own
    module counts: its `latest` importing stage promotion at the top cost every `rollout history` ~0.14 s."""
    code = (
        "import sys; from eventsourcing.domain import BaseAggregate;"
        " from rollouts.adapters.cli import rollout_cmds, rollout_views;"
        " from rollouts.adapters.store.sqlite import recorder;"
        " seen, todo = set(), [BaseAggregate]\n"
        "while todo:\n"
        "    todo += [c for c in todo.pop().__subclasses__() if c not in seen and not seen.add(c)]\n"
        "print(sorted({c.__module__ for c in seen if c.__module__.startswith('rollouts')}"
        " | {m for m in ('rollouts.domain.audit_rules',) if m in sys.modules}))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_a_lazy_verbs_line_is_shortened_as_click_shortens_an_eager_ones() -> None:
    """`latest` moved into the lazy table; `rollout --help` must print its line as it did when it was eager."""
    from click.testing import CliRunner

    shown = CliRunner().invoke(cli, ["rollout", "--help"], terminal_width=80).output
    assert "  latest   Roll out NAME's current spec as a new version and print that...\n" in shown


def test_rollout_latest_and_history_load_only_what_they_use(tmp_path: Path) -> None:
    """Each module named here cost every command's start-up 2-7 ms (the PostgreSQL backend on a SQLite home,
    the analysis templates' aggregate, the runtime's table through shell completion, socket for the host name)
    while neither `rollout latest` nor `rollout history` uses it; the home's binding aggregate (its event classes,
    for `home rebind`) ~2 ms more; and `latest` appends without opening a view, so the views' files and health
    checks (~3 ms, loaded for the one function that tells a broken file's error) stay out of it."""
    env = {**os.environ, "ROLLOUTS_HOME": str(tmp_path / "home"), "ROLLOUTS_ACTOR": "tester"}
    subprocess.run([sys.executable, "-m", "rollouts", "config", "create", "web", "--", "true"], env=env, check=True)
    common = (
        "socket",
        "rollouts.adapters.store.postgres.backend",
        "rollouts.domain.analysis_template",
        "rollouts.adapters.runtime.table",
        "rollouts.domain.home",
    )
    views = ("rollouts.projections.files", "rollouts.projections.health")
    for argv, unused in (
        (["rollout", "latest", "web"], common + views),
        (["rollout", "history", "web", "-o", "json"], common),
    ):
        code = (
            "import sys; from rollouts.adapters.entry import main; sys.argv = ['rollouts', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit as done:\n    assert not done.code, done.code\n"
            f"print(sorted(m for m in {unused!r} if m in sys.modules), file=sys.stderr)"
        )
        done = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True, check=True)
        assert done.stderr.strip().splitlines()[-1] == "[]", argv
