"""Analysis templates (DESIGN 7.9): what a template must say, and how a result becomes an outcome."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from rollouts.domain.analysis import TemplateSpec, outcome
from rollouts.domain.measured import shortened
from rollouts.domain.placeholders import missing_args, resolved


def prometheus(**changes: Any) -> TemplateSpec:
    base: dict[str, Any] = {"provider": "prometheus", "address": "http://127.0.0.1:9090", "query": "up"}
    return TemplateSpec(**{**base, **changes})


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"query": None}, "needs --query"),
        ({"address_env": "PROM"}, "exactly one of --address and --address-env"),
        ({"address": None}, "exactly one of --address and --address-env"),
        ({"url": "http://x"}, "--url is for the http provider"),
        ({"success": "result <"}, "is not a condition"),
        ({"success": "__import__('os')"}, "is not a condition"),
        ({"failure_limit": 3}, "could never fail"),
        ({"query": "rate(x{pod='{{args.pod}}'}[1m])"}, "unknown placeholder {{args.pod}}"),
        ({"query": "x{{rollout.colour}}"}, "unknown placeholder"),
        ({"address_env": "1BAD", "address": None}, "not a variable name"),
        ({"method": "POST"}, "for the http provider"),
    ],
)
def test_a_template_that_cannot_be_run_as_given_is_refused(changes: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=says.replace("{", r"\{").replace("}", r"\}")):
        prometheus(**changes)


def test_declared_arguments_and_rollout_placeholders_resolve() -> None:
    spec = prometheus(query='errors{app="{{args.app}}",v="{{ rollout.version }}"}', args={"app": None, "env": "prod"})
    assert missing_args(spec, {}) == ["app"]
    assert missing_args(spec, {"app": "web"}) == []
    assert resolved(spec.query or "", {"app": "web"}, {"version": "3"}) == 'errors{app="web",v="3"}'


@pytest.mark.parametrize(
    ("success", "failure", "result", "expected"),
    [
        ("result < 0.01", None, 0.001, "passed"),
        ("result < 0.01", None, 0.5, "failed"),
        ("result < 0.01", "result > 0.1", 0.05, "inconclusive"),
        ("result < 0.01", "result > 0.1", 0.5, "failed"),
        (None, None, 123, "passed"),
        (None, "result > 0.1", 0.5, "failed"),
        (None, "result > 0.1", 0.05, "passed"),
        ("result < 1", None, math.nan, "inconclusive"),
        ("result < 1", None, [0.1, 0.2], "inconclusive"),
    ],
)
def test_the_outcome_follows_the_conditions(
    success: str | None, failure: str | None, result: Any, expected: str
) -> None:
    spec = prometheus(success=success, failure=failure)
    assert outcome(spec, result, empty=False, error=None)[0] == expected


def test_an_empty_result_follows_on_empty_and_never_fails_by_default() -> None:
    assert outcome(prometheus(success="result < 1"), None, empty=True, error=None) == ("inconclusive", "empty result")
    assert outcome(prometheus(on_empty="failed"), None, empty=True, error=None) == ("failed", None)
    assert outcome(prometheus(on_empty="passed"), None, empty=True, error=None) == ("passed", None)


def test_an_error_is_inconclusive_and_kept_short_and_printable() -> None:
    verdict, why = outcome(prometheus(), None, empty=False, error="boom\x1b]0;title\x07" + "x" * 500)
    assert verdict == "inconclusive"
    assert why is not None and len(why) == 256 and "\x1b" not in why
    assert shortened("ok") == "ok"
