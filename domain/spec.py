"""The validated rollout spec of a config: what a deployment freezes and runs."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .names import HOOK_TRIES, NAME_PATTERN, validate_name  # noqa: F401 - re-exported
from .spec_defaults import STEP_DEFAULTS
from .stage import STAGE_DEFAULTS

ENV_KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HOOK_POLICIES = ("abort", "retry", "ignore")
RESERVED_PREFIX = "ROLLOUT_"  # set by rollouts itself for every deployer and hook
NEVER_PASSED = frozenset({"ROLLOUTS_STORE"})  # may hold the store's password
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY")


def looks_secret(name: str) -> bool:
    """Whether an env name looks like it holds a secret (*TOKEN*, *SECRET*, *PASSWORD*, *KEY*)."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def _passable(name: str) -> str:
    if not ENV_KEY_PATTERN.fullmatch(name):
        raise ValueError(f"invalid variable name {name[:80]!r}: a name only (its value is read at launch)")
    if name.startswith(RESERVED_PREFIX):
        raise ValueError(f"{name} cannot be passed: rollouts sets the {RESERVED_PREFIX}* variables itself")
    if name in NEVER_PASSED:
        raise ValueError(f"{name} cannot be passed: it may hold the store's password")
    return name


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
    pass_env: list[str] = Field(default_factory=list)  # names whose values are read at launch, never stored
    timeout: int = Field(default=600, ge=1, le=86400)
    history_limit: int = Field(default=10, ge=1)
    trigger: Literal["manual", "config-change"] = "manual"
    pre_hook: Hook | None = None
    post_hook: Hook | None = None
    require_approval: bool = False  # each deployment and retry waits for `rollout approve` by another actor
    approval_identity: Literal["label", "os", "db"] = "label"  # who counts as another (domain/approval.py)
    # DESIGN 7.6: steps, verification, automatic rollback. Left out of the stored data at their defaults.
    steps: list[int] | None = None  # the weights, strictly increasing, the last 100; None: one step
    step_pause: int | Literal["manual"] = 0  # seconds between steps, or "manual": wait for `rollout promote`
    verify: list[str] | None = Field(default=None, min_length=1)
    verify_count: int = Field(default=3, ge=1, le=1000)
    verify_interval: int = Field(default=10, ge=0, le=86400)
    verify_timeout: int = Field(default=30, ge=1, le=86400)
    failure_limit: int = Field(default=0, ge=0)
    inconclusive_limit: int = Field(default=0, ge=0)
    auto_rollback: bool = False  # a config policy, not part of what a deployment runs
    # DESIGN 7.9: the analysis templates each step's verification runs, and the values of their arguments.
    analysis: list[str] | None = None
    analysis_args: dict[str, str] | None = None
    # DESIGN 7.10: a stage takes the values of its `artifact` env keys from `upstream`'s eligible revisions
    # (domain/stage.py). Config policy, not what a deployment runs; left out of the stored data when unset.
    upstream: str | None = None
    artifact: list[str] | None = None
    soak: int = Field(default=0, ge=0, le=31536000)
    promote: Literal["manual", "auto"] = "manual"

    _command_not_blank = field_validator("command")(classmethod(lambda cls, argv: _argv_not_blank(argv)))

    @field_validator("verify")
    @classmethod
    def _verify_not_blank(cls, argv: list[str] | None) -> list[str] | None:
        return None if argv is None else _argv_not_blank(argv)

    @field_validator("analysis")
    @classmethod
    def _templates(cls, names: list[str] | None) -> list[str] | None:
        if not names:
            return None
        for name in names:
            validate_name(name)
        if len(set(names)) != len(names):
            raise ValueError("an analysis template is named twice")
        return names

    @field_validator("analysis_args")
    @classmethod
    def _template_args(cls, args: dict[str, str] | None) -> dict[str, str] | None:
        return args or None

    @field_validator("steps")
    @classmethod
    def _weights(cls, weights: list[int] | None) -> list[int] | None:
        if weights is None:
            return None
        if not weights or any(not 1 <= w <= 100 for w in weights):
            raise ValueError("each step's weight must be in 1..100")
        if any(b <= a for a, b in zip(weights, weights[1:], strict=False)):
            raise ValueError("the steps' weights must be strictly increasing")
        if weights[-1] != 100:
            raise ValueError("the last step's weight must be 100")
        return weights

    @field_validator("step_pause")
    @classmethod
    def _pause(cls, pause: int | str) -> int | str:
        if isinstance(pause, int) and not 0 <= pause <= 86400:
            raise ValueError("the step pause must be 0..86400 seconds, or manual")
        return pause

    @field_validator("upstream")
    @classmethod
    def _upstream_name(cls, name: str | None) -> str | None:
        return None if name is None else validate_name(name)

    @field_validator("artifact")
    @classmethod
    def _artifact_keys(cls, keys: list[str] | None) -> list[str] | None:
        if keys is None:
            return None
        if not keys or len(set(keys)) != len(keys):
            raise ValueError("--artifact names one or more env keys, each once")
        for key in keys:
            if not ENV_KEY_PATTERN.fullmatch(key) or key.startswith(RESERVED_PREFIX):
                raise ValueError(f"invalid artifact key {key[:80]!r}: an env name, not {RESERVED_PREFIX}*")
        return keys

    @field_validator("env")
    @classmethod
    def _env_keys(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:
            if not ENV_KEY_PATTERN.fullmatch(key):
                raise ValueError(f"invalid env name {key!r}")
        return env

    @field_validator("pass_env")
    @classmethod
    def _pass_env_names(cls, names: list[str]) -> list[str]:
        return sorted({_passable(name) for name in names})

    @model_validator(mode="after")
    def _set_or_passed(self) -> Spec:
        both = sorted(set(self.env) & set(self.pass_env))
        if both:
            raise ValueError(f"{both[0]} is both set in env and passed from the controller's environment: keep one")
        if (self.upstream is None) != (self.artifact is None):
            raise ValueError("a stage needs both --from UPSTREAM and --artifact KEYS")
        if self.upstream is None and (self.soak, self.promote) != (0, "manual"):
            raise ValueError("--soak and --promote are for a stage: give --from UPSTREAM --artifact KEYS too")
        if self.failure_limit >= self.verify_count:
            raise ValueError(
                f"a failure limit of {self.failure_limit} with {self.verify_count} measurements could never fail:"
                " keep it below the verify count"
            )
        return self

    def _unstored(self) -> set[str]:
        """An empty pass_env, require_approval when off, approval_identity when label, and the fields of 7.6
        at their defaults, are left out of the data: specs without them stay as they were written (and hash
        the same)."""
        unstored = (
            (set() if self.pass_env else {"pass_env"})
            | (set() if self.require_approval else {"require_approval"})
            | (set() if self.approval_identity != "label" else {"approval_identity"})
        )
        defaults = {**STEP_DEFAULTS, **STAGE_DEFAULTS}
        return unstored | {f for f, default in defaults.items() if getattr(self, f) == default}

    @property
    def step_weights(self) -> list[int]:
        """The weight of each step: [100] without --steps."""
        return list(self.steps) if self.steps else [100]

    def to_data(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude=self._unstored())

    def rollout_part(self) -> dict[str, Any]:
        """What a deployment runs; a change here is a config change. (With pass_env even when empty:
        `undo` lays it over the current spec.)"""
        return self.model_dump(
            mode="json",
            exclude={
                "history_limit",
                "trigger",
                "require_approval",
                "approval_identity",
                "auto_rollback",
                *STAGE_DEFAULTS,
            },
        )

    def hook(self, which: str) -> Hook | None:
        return self.pre_hook if which == "pre" else self.post_hook
