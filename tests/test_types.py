"""Types a checker and a reader can hold: a parameter, attribute or return typed `Any` itself (not `dict[str,
Any]`, a JSON document) is rare and says why on its line."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("domain", "projections", "adapters")
MOST = 30


def _is_any(annotation: ast.expr | None) -> bool:
    """`Any`, `typing.Any`, `"Any"`, or `Any | None`: the annotation says nothing of the value."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.replace(" ", "") in ("Any", "Any|None", "None|Any")
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = (annotation.left, annotation.right)
        return any(_is_any(s) for s in sides) and all(
            _is_any(s) or (isinstance(s, ast.Constant) and s.value is None) for s in sides
        )
    return (isinstance(annotation, ast.Name) and annotation.id == "Any") or (
        isinstance(annotation, ast.Attribute) and annotation.attr == "Any"
    )


def typed_any(source: str) -> list[tuple[int, str]]:
    """(line, text) of every parameter, return and attribute annotated `Any` itself."""
    found: list[tuple[int, str]] = []
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        annotations: list[ast.expr | None] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
            annotations += [a.annotation for a in every if a is not None]
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        found += [(a.lineno, lines[a.lineno - 1].strip()) for a in annotations if a is not None and _is_any(a)]
    return found


def test_few_values_are_typed_any_and_each_says_why() -> None:
    found = [
        (path.relative_to(ROOT).as_posix(), line, text)
        for folder in PRODUCT
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, text in typed_any(path.read_text())
    ]
    listed = "\n".join(f"{path}:{line}: {text}" for path, line, text in found)
    assert len(found) <= MOST, f"{len(found)} values typed Any (at most {MOST}):\n{listed}"
    unexplained = [f"{path}:{line}" for path, line, text in found if "#" not in text]
    assert unexplained == [], f"a value typed Any says why in a comment on its line: {unexplained}"


def test_the_count_sees_parameters_returns_and_attributes_but_not_json_documents() -> None:
    source = (
        "from typing import Any\n"
        "def f(a: Any, b: dict[str, Any], *rest: Any) -> Any: ...\n"
        "class C:\n    x: Any | None\n    y: list[Any]\n    z: 'Any'\n"
    )
    assert [line for line, _ in typed_any(source)] == [2, 2, 2, 4, 6]
