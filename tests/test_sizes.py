"""Sizes a reader can hold: every module of the product (domain/, projections/, adapters/ with its service/) at most
400 lines, every function or method in it at most 60, from its `def` line to its last (issue 47).

bench/ is exempt: its scenarios and figures are scripts run by hand, not the product a user installs."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("domain", "projections", "adapters")
MODULE_LINES = 400
FUNCTION_LINES = 60


def _modules() -> list[Path]:
    return [path for folder in PRODUCT for path in sorted((ROOT / folder).rglob("*.py"))]


def long_functions(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of each function, method or nested function longer than FUNCTION_LINES."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > FUNCTION_LINES:
                found.append((node.name, node.lineno, lines))
    return found


def test_no_module_is_longer_than_400_lines() -> None:
    long = {
        path.relative_to(ROOT).as_posix(): count
        for path in _modules()
        if (count := len(path.read_text().splitlines())) > MODULE_LINES
    }
    assert long == {}, f"split these modules (at most {MODULE_LINES} lines): {long}"


def test_no_function_is_longer_than_60_lines() -> None:
    long = [
        f"{path.relative_to(ROOT).as_posix()}:{line}: {name} ({count} lines)"
        for path in _modules()
        for name, line, count in long_functions(path.read_text())
    ]
    assert long == [], f"split these functions (at most {FUNCTION_LINES} lines each): {long}"


def test_the_length_counts_from_the_def_to_the_last_line_of_nested_functions_too() -> None:
    def body(indent: int) -> str:
        return "".join(f"{' ' * indent}x = {i}\n" for i in range(FUNCTION_LINES - 1))

    fits = f"@decorated\ndef fits():\n{body(4)}\n"
    source = f"{fits}\nclass C:\n    def over(self):\n        def inner():\n{body(12)}{body(12)}"
    assert [(name, lines) for name, _, lines in long_functions(source)] == [
        ("over", 2 * FUNCTION_LINES),
        ("inner", 2 * FUNCTION_LINES - 1),
    ]
