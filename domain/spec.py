"""The validated rollout spec of a config: what a deployment freezes and runs."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from domain.names import HOOK_TRIES, NAME_PATTERN, validate_name  # noqa: F401 - re-exported

ENV_KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HOOK_POLICIES = ("abort", "retry", "ignore")


def _argv_not_blank(argv: list[str]) -> list[str]:
    if not argv[0].strip():
        raise ValueError("the command must not be empty")
    return argv


class Hook(BaseModel):
    """A lifecycle hook: an argv run as a deployer of its own, and its policy."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: list[str] = Field(min_length=1)
    policy: Literal["abort", "retry", "ignore"] = "abort"

    _command_not_blank = field_validator("command")(classmethod(lambda cls, argv: _argv_not_blank(argv)))


class Spec(BaseModel):
    """Everything a config says about how to roll it out."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    timeout: int = Field(default=600, ge=1, le=86400)
    history_limit: int = Field(default=10, ge=1)
    trigger: Literal["manual", "config-change"] = "manual"
    pre_hook: Hook | None = None
    post_hook: Hook | None = None

    _command_not_blank = field_validator("command")(classmethod(lambda cls, argv: _argv_not_blank(argv)))

    @field_validator("env")
    @classmethod
    def _env_keys(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:
            if not ENV_KEY_PATTERN.fullmatch(key):
                raise ValueError(f"invalid env name {key!r}")
        return env

    def to_data(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def rollout_part(self) -> dict[str, Any]:
        """What a deployment runs; a change here is a config change."""
        return self.model_dump(mode="json", exclude={"history_limit", "trigger"})

    def hook(self, which: str) -> Hook | None:
        return self.pre_hook if which == "pre" else self.post_hook
