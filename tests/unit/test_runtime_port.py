"""LocalRuntime and the tests' runtimes implement the whole runtime port, with its signatures."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

from rollouts.adapters.runtime.local import LocalRuntime
from rollouts.adapters.runtime.port import Runtime

sys.path.insert(0, str(Path(__file__).parents[1] / "property"))

from sim_runtime import SimRuntime  # noqa: E402
from test_executor_guards import BatchingRuntime, FakeRuntime  # noqa: E402

IMPLEMENTATIONS = [LocalRuntime, SimRuntime, FakeRuntime, BatchingRuntime]


def members(cls: type) -> list[str]:
    return [name for name in vars(cls) if not name.startswith("_")]


def parameters(function: object) -> list[tuple[str, object, object]]:
    """Names, kinds and whether there is a default (annotations are checked by a type checker)."""
    return [
        (p.name, p.kind, p.default is inspect.Parameter.empty) for p in inspect.signature(function).parameters.values()
    ]


def test_the_port_names_every_call_the_controller_makes() -> None:
    assert sorted(members(Runtime)) == sorted(
        [
            "folder",
            "database",
            "create",
            "batched",
            "tombstone",
            "get",
            "born",
            "list",
            "active",
            "observe",
            "stop",
            "delete",
            "prune",
            "log_path",
            "beat",
            "data_version",
            "start_fork_server",
            "close",
        ]
    )


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS, ids=lambda c: c.__name__)
def test_each_runtime_implements_every_call_of_the_port_with_its_signature(implementation: type) -> None:
    for name in members(Runtime):
        wanted = getattr(Runtime, name)
        found = getattr(implementation, name, None)
        assert found is not None, f"{implementation.__name__} has no {name}"
        if isinstance(wanted, property):
            assert isinstance(found, property), f"{implementation.__name__}.{name} is not a property"
        else:
            assert parameters(found) == parameters(wanted), f"{implementation.__name__}.{name}"


def test_a_claim_reads_back_as_it_was_written_and_a_disowned_one_names_none() -> None:
    from rollouts.adapters.runtime.port import UNKNOWN_CLAIM, claim_parts, claim_text

    assert claim_parts(claim_text("abc", 17, "f" * 64)) == ("abc", 17, "f" * 64)
    assert claim_parts(claim_text("abc", 3, None)) == ("abc", 3, "")
    assert claim_parts(None) is None and claim_parts(UNKNOWN_CLAIM) is None
