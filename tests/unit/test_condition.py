"""The condition language of analysis templates: what it accepts, what it refuses, and what it decides."""

from __future__ import annotations

import math

import pytest

from rollouts.domain.condition import ConditionError, EvaluationError, check, decide


@pytest.mark.parametrize(
    ("condition", "result", "holds"),
    [
        ("result < 0.01", 0.005, True),
        ("result < 0.01", 0.02, False),
        ("result >= 1e3", 1000, True),
        ("result == 'ok'", "ok", True),
        ('result != "ok"', "ok", False),
        ("result[0] > 1 and result[1] > 1", [2, 3], True),
        ("len(result) == 3", [1, 2, 3], True),
        ("max(result) < 5 or min(result) > 100", [1, 2], True),
        ("all(result < 0.5)", [0.1, 0.2], True),
        ("all(result < 0.5)", [0.1, 0.7], False),
        ("any(result > 0.5)", [0.1, 0.7], True),
        ("not (result > -1)", -2, True),
        ("result == true", True, True),
        ("result", True, True),
        ("result > 2 and result < 4 or result == 10", 10, True),
    ],
)
def test_a_condition_decides_over_a_result(condition: str, result: object, holds: bool) -> None:
    assert decide(condition, result) is holds  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "condition",
    [
        "",
        "result <",
        "__import__('os').system('true')",
        "result.__class__",
        "open('x')",
        "result + 1 > 2",
        "result[-1] > 0",
        "len(result",
        "result < 1 ; true",
        "lambda: 1",
        "resultx > 1",
    ],
)
def test_anything_outside_the_language_is_refused_when_given(condition: str) -> None:
    with pytest.raises(ConditionError):
        check(condition)


@pytest.mark.parametrize(
    ("condition", "result"),
    [
        ("result < 1", math.nan),
        ("result < 1", None),
        ("result < 1", "text"),
        ("result[3] > 1", [1]),
        ("result and true", 1),
        ("len(result) > 1", 5),
        ("result < 1", [[1]]),
        ("max(result) > 1", []),
    ],
)
def test_a_result_of_the_wrong_kind_cannot_decide_and_says_why(condition: str, result: object) -> None:
    with pytest.raises(EvaluationError):
        decide(condition, result)  # type: ignore[arg-type]


def test_an_unknown_name_is_named_in_the_refusal() -> None:
    with pytest.raises(ConditionError, match="unknown name 'os'"):
        check("os > 1")
