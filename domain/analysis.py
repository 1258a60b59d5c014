"""Analysis templates (DESIGN 7.9): what a template says, its placeholders, and how a measurement's result
becomes an outcome."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from . import condition, measured
from .analysis_template import CADENCE
from .condition import Value
from .measured import Outcome
from .placeholders import known, placeholders_of, resolved
from .spec import ENV_KEY_PATTERN

PROVIDERS = ("prometheus", "http", "command")
ARG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,62}$")


class TemplateSpec(BaseModel):
    """Everything a template says: its provider and what to ask it, its conditions, its cadence and limits,
    and the arguments it declares (a default, or None: the config must give it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: Literal["prometheus", "http", "command"]
    address: str | None = None
    address_env: str | None = None
    query: str | None = None
    url: str | None = None
    url_env: str | None = None
    method: Literal["GET", "POST"] = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    header_env: dict[str, str] = Field(default_factory=dict)  # header -> the variable holding its value
    body: str | None = None
    json_path: str | None = None
    command: list[str] | None = Field(default=None, min_length=1)
    success: str | None = None
    failure: str | None = None
    on_empty: Literal["inconclusive", "failed", "passed"] = "inconclusive"
    count: int = Field(default=CADENCE["count"], ge=1, le=1000)
    interval: int = Field(default=CADENCE["interval"], ge=0, le=86400)
    timeout: int = Field(default=30, ge=1, le=86400)
    failure_limit: int = Field(default=CADENCE["failure_limit"], ge=0)
    inconclusive_limit: int = Field(default=CADENCE["inconclusive_limit"], ge=0)
    args: dict[str, str | None] = Field(default_factory=dict)

    @field_validator("success", "failure")
    @classmethod
    def _condition(cls, text: str | None) -> str | None:
        if text is None:
            return None
        try:
            return condition.check(text)
        except condition.ConditionError as error:
            raise ValueError(f"{text!r} is not a condition: {error}") from None

    @field_validator("address_env", "url_env")
    @classmethod
    def _variable(cls, name: str | None) -> str | None:
        if name is not None and not ENV_KEY_PATTERN.fullmatch(name):
            raise ValueError(f"{name[:80]!r} is not a variable name")
        return name

    @field_validator("header_env")
    @classmethod
    def _header_variables(cls, names: dict[str, str]) -> dict[str, str]:
        for header, name in names.items():
            if not ENV_KEY_PATTERN.fullmatch(name):
                raise ValueError(f"{name[:80]!r} (for header {header!r}) is not a variable name")
        return names

    @field_validator("args")
    @classmethod
    def _arg_names(cls, args: dict[str, str | None]) -> dict[str, str | None]:
        for name in args:
            if not ARG_NAME.fullmatch(name):
                raise ValueError(f"{name[:80]!r} is not an argument name (letters, digits, _ and -)")
        return args

    @model_validator(mode="after")
    def _whole(self) -> TemplateSpec:
        _provider_options(self)
        if self.failure_limit >= self.count:
            raise ValueError(f"failure limit {self.failure_limit} >= count {self.count}: it could never fail")
        unknown = [p for p in placeholders_of(self) if not known(p, self.args)]
        if unknown:
            raise ValueError(f"unknown placeholder {{{{{unknown[0]}}}}}")
        return self


_OWN: dict[str, tuple[str, ...]] = {
    "prometheus": ("address", "address_env", "query"),
    "http": ("url", "url_env", "body", "json_path"),
    "command": ("command",),
}


def _provider_options(spec: TemplateSpec) -> None:
    """Each provider's own options, present as it needs them; another provider's options refused."""
    for provider, options in _OWN.items():
        given = [o for o in options if getattr(spec, o) is not None]
        if provider != spec.provider and given:
            raise ValueError(f"--{given[0].replace('_', '-')} is for the {provider} provider, not {spec.provider}")
    if spec.provider != "http" and (spec.headers or spec.header_env or spec.method != "GET"):
        raise ValueError(f"--method and --header are for the http provider, not {spec.provider}")
    if spec.provider == "prometheus":
        _one_of(spec.address, spec.address_env, "--address", "--address-env")
        if not spec.query:
            raise ValueError("the prometheus provider needs --query")
    elif spec.provider == "http":
        _one_of(spec.url, spec.url_env, "--url", "--url-env")
    elif not spec.command:
        raise ValueError("the command provider needs --command")


def _one_of(value: str | None, variable: str | None, option: str, env_option: str) -> None:
    if (value is None) == (variable is None):
        raise ValueError(f"give exactly one of {option} and {env_option}")


def outcome(spec: TemplateSpec, result: Value, *, empty: bool, error: str | None) -> tuple[Outcome, str | None]:
    """A measurement's outcome under `spec`'s conditions (measured.outcome says the rule)."""
    return measured.outcome(spec.success, spec.failure, spec.on_empty, result, empty=empty, error=error)


def resolved_document(
    spec: TemplateSpec, label: str, args: Mapping[str, str], rollout: Mapping[str, str]
) -> dict[str, object]:
    """What a measurement process reads in $ROLLOUT_ANALYSIS: the spec's fields with each placeholder in the
    query, URL, headers, body and command replaced, and `name` (TEMPLATE@VERSION)."""

    def text(value: str | None) -> str | None:
        return None if value is None else resolved(value, args, rollout)

    done = spec.model_copy(
        update={
            "query": text(spec.query),
            "url": text(spec.url),
            "body": text(spec.body),
            "headers": {header: resolved(value, args, rollout) for header, value in spec.headers.items()},
            "command": None if spec.command is None else [resolved(part, args, rollout) for part in spec.command],
        }
    )
    return {**done.model_dump(mode="json", exclude_none=True), "name": label}
