"""The validated spec: config names, command, env, timeout, history limit and hooks."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from rollouts.domain.spec import Hook, Spec, looks_secret, validate_name


def spec(**fields: Any) -> Spec:
    return Spec(**{"command": ["deploy"], **fields})


# -- names -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "0", "app", "my-app-2", "a--b", "9to5", "a" * 63])
def test_valid_dns_label_is_accepted(name: str) -> None:
    assert validate_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a" * 64,
        "App",
        "APP",
        "-app",
        "app-",
        "-",
        "a_b",
        "a.b",
        "a b",
        "app\n",
        "\napp",
        "a\x00b",
        "a;rm -rf /",
        "$(x)",
        "`x`",
        "../x",
        "a/b",
        "café",
        "\u0430pp",  # Cyrillic a
        "ａｐｐ",  # fullwidth letters
        "\u0661\u0662",  # Arabic-Indic digits
        "\u212a",  # Kelvin sign, which folds to k
    ],
)
def test_invalid_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="DNS-1123"):
        validate_name(name)


def test_refusal_of_a_huge_name_quotes_only_its_start() -> None:
    with pytest.raises(ValueError) as refused:
        validate_name("x" * 10_000)
    assert len(str(refused.value)) < 300


# -- command and env ----------------------------------------------------------------


@pytest.mark.parametrize("command", [[], [""], ["  "], ["\t"]])
def test_empty_command_is_refused(command: list[str]) -> None:
    with pytest.raises(ValidationError):
        spec(command=command)


def test_command_arguments_are_kept_verbatim() -> None:
    argv = ["sh", "-c", "echo $(x); rm -rf /", ""]
    assert spec(command=argv).command == argv


@pytest.mark.parametrize("key", ["A", "_", "_x", "PATH", "a1_B2"])
def test_valid_env_name_is_accepted(key: str) -> None:
    assert spec(env={key: "v"}).env == {key: "v"}


@pytest.mark.parametrize("key", ["", "1A", "A-B", "A=B", "A B", "Ä", "A\n", "$(x)"])
def test_invalid_env_name_is_refused(key: str) -> None:
    with pytest.raises(ValidationError, match="invalid env name"):
        spec(env={key: "v"})


def test_env_values_may_hold_any_text() -> None:
    assert spec(env={"A": "x=y; $(z) é"}).env["A"] == "x=y; $(z) é"


# -- timeout and history limit --------------------------------------------------------


def test_defaults_are_a_ten_minute_timeout_and_ten_kept_revisions() -> None:
    s = spec()
    assert (s.timeout, s.history_limit, s.trigger, s.pre_hook, s.post_hook) == (600, 10, "manual", None, None)


@pytest.mark.parametrize("timeout", [1, 86400])
def test_timeout_bounds_are_accepted(timeout: int) -> None:
    assert spec(timeout=timeout).timeout == timeout


@pytest.mark.parametrize("timeout", [0, -1, 86401])
def test_timeout_out_of_bounds_is_refused(timeout: int) -> None:
    with pytest.raises(ValidationError):
        spec(timeout=timeout)


@pytest.mark.parametrize("limit", [0, -1])
def test_history_limit_below_one_is_refused(limit: int) -> None:
    with pytest.raises(ValidationError):
        spec(history_limit=limit)


def test_history_limit_of_one_is_accepted() -> None:
    assert spec(history_limit=1).history_limit == 1


def test_unknown_trigger_or_field_is_refused() -> None:
    with pytest.raises(ValidationError):
        spec(trigger="sometimes")
    with pytest.raises(ValidationError):
        spec(replicas=3)


# -- hooks -------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["abort", "retry", "ignore"])
def test_hook_policies_are_accepted(policy: str) -> None:
    s = spec(pre_hook={"command": ["migrate"], "policy": policy})
    assert s.hook("pre") == Hook(command=["migrate"], policy=policy)
    assert s.hook("post") is None


def test_unknown_hook_policy_is_refused() -> None:
    with pytest.raises(ValidationError):
        spec(post_hook={"command": ["x"], "policy": "skip"})


def test_hook_without_a_command_is_refused() -> None:
    with pytest.raises(ValidationError):
        spec(pre_hook={"command": []})


@pytest.mark.parametrize("command", [[""], ["  "]])
def test_hook_with_a_blank_command_is_refused_like_the_deployer_command(command: list[str]) -> None:
    with pytest.raises(ValidationError):
        spec(pre_hook={"command": command})


# -- data ----------------------------------------------------------------------------


def test_spec_round_trips_through_its_data() -> None:
    s = spec(env={"A": "1"}, timeout=30, pre_hook={"command": ["pre"], "policy": "retry"})
    assert Spec.model_validate(s.to_data()) == s


def test_rollout_part_leaves_out_what_does_not_change_a_rollout() -> None:
    part = spec(history_limit=3, trigger="config-change").rollout_part()
    assert "history_limit" not in part and "trigger" not in part
    assert part["command"] == ["deploy"]


def test_spec_is_immutable() -> None:
    with pytest.raises(ValidationError):
        spec().timeout = 5  # type: ignore[misc]


# -- pass_env ----------------------------------------------------------------------


def test_pass_env_holds_names_sorted_and_once() -> None:
    assert spec(pass_env=["B_TOKEN", "A", "B_TOKEN"]).pass_env == ["A", "B_TOKEN"]


@pytest.mark.parametrize(
    "name", ["", "1A", "A=b", "MY-VAR", "A B", "é", "ROLLOUT_CONFIG", "ROLLOUT_X", "ROLLOUTS_STORE"]
)
def test_pass_env_refuses_what_is_not_a_passable_variable_name(name: str) -> None:
    with pytest.raises(ValidationError):
        spec(pass_env=[name])


def test_a_name_both_set_and_passed_is_refused() -> None:
    with pytest.raises(ValidationError, match="keep one"):
        spec(env={"A": "1"}, pass_env=["A"])


def test_a_spec_without_pass_env_stores_what_it_stored_before_pass_env_existed() -> None:
    assert "pass_env" not in spec().to_data() and spec().rollout_part()["pass_env"] == []
    assert spec(pass_env=["T"]).to_data()["pass_env"] == ["T"]
    assert Spec.model_validate(spec(pass_env=["T"]).to_data()) == spec(pass_env=["T"])


def test_a_pass_env_change_is_a_rollout_change() -> None:
    assert spec(pass_env=["T"]).rollout_part() != spec().rollout_part()


@pytest.mark.parametrize(
    ("name", "secret"),
    [("API_TOKEN", True), ("client_secret", True), ("PGPASSWORD", True), ("ssh_key", True), ("Monkey", True)]
    + [("PORT", False), ("LOG_LEVEL", False), ("TOKE", False)],
)
def test_names_that_look_secret(name: str, secret: bool) -> None:
    assert looks_secret(name) is secret
