"""The condition language of analysis templates (`--success`, `--failure`): parsed once, checked at `analysis
create|set`, evaluated over a measurement's `result`, never as Python.

    condition  := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | comparison
    comparison := operand (("<" | "<=" | ">" | ">=" | "==" | "!=") operand)?
    operand    := atom ("[" INTEGER "]")*
    atom       := NUMBER | STRING | "true" | "false" | "result" | FUNCTION "(" or ")" | "(" or ")"
    FUNCTION   := "len" | "min" | "max" | "all" | "any"

A comparison of a list with a single value compares each item (`all(result < 0.01)`); `and`, `or` and
`not` take booleans only; a value of the wrong kind at measurement time is an EvaluationError (the
measurement is then inconclusive, with that error), never a guess.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Value = float | int | str | bool | list["Value"] | None  # what `result` and every sub-expression can be

FUNCTIONS = ("len", "min", "max", "all", "any")
COMPARISONS = ("<=", ">=", "==", "!=", "<", ">")
_TOKEN = re.compile(
    r"""\s*(?:
    (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<op><=|>=|==|!=|<|>|\(|\)|\[|\]|-)
  | (?P<word>[A-Za-z_][A-Za-z_0-9]*)
    )""",
    re.VERBOSE,
)


class ConditionError(ValueError):
    """A condition that is not of the language (refused where it is given: exit 2)."""


class EvaluationError(ValueError):
    """A condition that cannot be decided over this result (the measurement is inconclusive)."""


@dataclass(frozen=True)
class Literal:
    value: Value


@dataclass(frozen=True)
class Result:
    """The measurement's result."""


@dataclass(frozen=True)
class Index:
    of: Node
    at: int


@dataclass(frozen=True)
class Call:
    function: str
    argument: Node


@dataclass(frozen=True)
class Compare:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Logic:
    op: str  # "and", "or" or "not" (then `right` is None)
    left: Node
    right: Node | None


Node = Literal | Result | Index | Call | Compare | Logic


def tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) of each token; ConditionError at the first character that starts none."""
    found: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.lastgroup is None:
            raise ConditionError(f"unexpected {text[position:].strip()[:20]!r} at character {position + 1}")
        found.append((match.lastgroup, match.group(match.lastgroup)))
        position = match.end()
    return found


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = tokens(text)
        self.at = 0

    def peek(self) -> tuple[str, str] | None:
        return self.items[self.at] if self.at < len(self.items) else None

    def take(self, text: str | None = None) -> tuple[str, str]:
        item = self.peek()
        if item is None:
            raise ConditionError("the condition ends too soon" + (f": {text!r} expected" if text else ""))
        if text is not None and item[1] != text:
            raise ConditionError(f"{text!r} expected, not {item[1]!r}")
        self.at += 1
        return item

    def whole(self) -> Node:
        if not self.items:
            raise ConditionError("the condition is empty")
        node = self.logic("or")
        if self.peek() is not None:
            raise ConditionError(f"unexpected {self.peek()[1]!r} after a whole condition")  # type: ignore[index]
        return node

    def logic(self, op: str) -> Node:
        lower: Callable[[], Node] = (lambda: self.logic("and")) if op == "or" else self.negation
        node = lower()
        while self.peek() == ("word", op):
            self.take()
            node = Logic(op, node, lower())
        return node

    def negation(self) -> Node:
        if self.peek() == ("word", "not"):
            self.take()
            return Logic("not", self.negation(), None)
        return self.comparison()

    def comparison(self) -> Node:
        left = self.operand()
        item = self.peek()
        if item is not None and item[0] == "op" and item[1] in COMPARISONS:
            self.take()
            return Compare(item[1], left, self.operand())
        return left

    def operand(self) -> Node:
        node = self.atom()
        while self.peek() == ("op", "["):
            self.take()
            kind, text = self.take()
            if kind != "number" or not text.isdigit():
                raise ConditionError(f"an index is a whole number, not {text!r}")
            self.take("]")
            node = Index(node, int(text))
        return node

    def atom(self) -> Node:
        kind, text = self.take()
        if kind == "number":
            return Literal(_number(text))
        if (kind, text) == ("op", "-"):
            sign_kind, digits = self.take()
            if sign_kind != "number":
                raise ConditionError(f"a number expected after '-', not {digits!r}")
            return Literal(-_number(digits))
        if kind == "string":
            return Literal(_unquoted(text))
        if (kind, text) == ("op", "("):
            node = self.logic("or")
            self.take(")")
            return node
        if kind == "word":
            return self.word(text)
        raise ConditionError(f"unexpected {text!r}")

    def word(self, text: str) -> Node:
        if text in ("true", "false"):
            return Literal(text == "true")
        if text == "result":
            return Result()
        if text in FUNCTIONS:
            self.take("(")
            argument = self.logic("or")
            self.take(")")
            return Call(text, argument)
        raise ConditionError(
            f"unknown name {text!r}: a condition knows result, true, false, and, or, not, " + ", ".join(FUNCTIONS)
        )


def _number(text: str) -> float | int:
    return float(text) if any(c in text for c in ".eE") else int(text)


def _unquoted(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


def parse(text: str) -> Node:
    """The condition `text` as a tree (ConditionError: not of the language, saying where)."""
    return _Parser(text).whole()


def evaluate(node: Node, result: Value) -> Value:
    """The value of `node` over `result` (EvaluationError: this result cannot decide it)."""
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Result):
        return result
    if isinstance(node, Index):
        items = evaluate(node.of, result)
        if not isinstance(items, list):
            raise EvaluationError(f"[{node.at}] of {_kind(items)}, not a list")
        if node.at >= len(items):
            raise EvaluationError(f"[{node.at}] of a list of {len(items)}")
        return items[node.at]
    if isinstance(node, Call):
        return _call(node.function, evaluate(node.argument, result))
    if isinstance(node, Compare):
        return _compare(node.op, evaluate(node.left, result), evaluate(node.right, result))
    return _logic(node, result)


def _logic(node: Logic, result: Value) -> bool:
    left = _boolean(evaluate(node.left, result), node.op)
    if node.op == "not":
        return not left
    if node.op == "and" and not left:
        return False
    if node.op == "or" and left:
        return True
    assert node.right is not None  # the parser gives "and" and "or" two sides
    return _boolean(evaluate(node.right, result), node.op)


def _boolean(value: Value, op: str) -> bool:
    if not isinstance(value, bool):
        raise EvaluationError(f"'{op}' takes true or false, not {_kind(value)}")
    return value


def _call(function: str, value: Value) -> Value:
    if not isinstance(value, list):
        raise EvaluationError(f"{function}() takes a list, not {_kind(value)}")
    if function == "len":
        return len(value)
    if function in ("all", "any"):
        flags = [_boolean(item, f"{function}()") for item in value]
        return all(flags) if function == "all" else any(flags)
    numbers = [_comparable(item) for item in value]
    if not numbers:
        raise EvaluationError(f"{function}() of an empty list")
    return min(numbers) if function == "min" else max(numbers)


def _compare(op: str, left: Value, right: Value) -> Value:
    if isinstance(left, list) and not isinstance(right, list):
        return [_compare(op, item, right) for item in left]
    if isinstance(right, list) and not isinstance(left, list):
        return [_compare(op, left, item) for item in right]
    if isinstance(left, list) or isinstance(right, list):
        raise EvaluationError(f"'{op}' between two lists")
    if op in ("==", "!="):
        same = _comparable(left) == _comparable(right) if _numeric(left) and _numeric(right) else left == right
        return same if op == "==" else not same
    a, b = _comparable(left), _comparable(right)
    if isinstance(a, str) != isinstance(b, str):
        raise EvaluationError(f"'{op}' between {_kind(left)} and {_kind(right)}")
    return _ORDER[op](a, b)


_ORDER: dict[str, Callable[[float | str, float | str], bool]] = {
    "<": lambda a, b: a < b,  # type: ignore[operator]
    "<=": lambda a, b: a <= b,  # type: ignore[operator]
    ">": lambda a, b: a > b,  # type: ignore[operator]
    ">=": lambda a, b: a >= b,  # type: ignore[operator]
}


def _numeric(value: Value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _comparable(value: Value) -> float | str:
    if _numeric(value):
        number = float(value)  # type: ignore[arg-type]
        if math.isnan(number):
            raise EvaluationError("the result is NaN")
        return number
    if isinstance(value, str):
        return value
    raise EvaluationError(f"cannot order {_kind(value)}")


def _kind(value: Value) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing"
    return "a string" if isinstance(value, str) else "a number"


def check(text: str) -> str:
    """`text` if it is a condition of the language (ConditionError naming what is wrong, else)."""
    parse(text)
    return text


def decide(condition: str, result: Value) -> bool:
    """Whether `condition` holds over `result` (EvaluationError: a value of the wrong kind)."""
    value = evaluate(parse(condition), result)
    if not isinstance(value, bool):
        raise EvaluationError(f"the condition gives {_kind(value)}, not true or false")
    return value


def numbers_of(values: Sequence[Value]) -> list[float]:
    """The numeric values among `values` (for charts and metrics)."""
    return [float(v) for v in values if _numeric(v)]  # type: ignore[arg-type]
