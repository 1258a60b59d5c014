"""The domain of a move: which deployments a log leaves open, and a deployment abandoned by a fork."""

from __future__ import annotations

import pytest

from rollouts.domain import phases
from rollouts.domain.deployment import Deployment
from rollouts.domain.errors import IllegalTransition
from rollouts.domain.open_fold import OpenFold


def deployment() -> Deployment:
    from uuid import uuid4

    return Deployment(config_id=uuid4(), config="web", revision=1, spec={"command": ["true"]}, cause="manual",
                      message=None, meta={})  # fmt: skip


def test_the_fold_names_open_deployments_new_ones_included() -> None:
    fold = OpenFold()
    created = {"config": "web", "revision": 1, "config_id": "ab"}
    fold.feed("s1", "deployment", "Created", created)
    fold.feed("s2", "deployment", "Created", {**created, "revision": 2})
    fold.feed("s2", "deployment", "DeployerClaimed", {})
    fold.feed("s3", "deployment", "Created", {**created, "revision": 3})
    fold.feed("s3", "deployment", "CancelRequested", {})
    fold.feed("c", "config", "Registered", {})
    assert fold.open() == ["s1", "s2"]
    assert fold.left_open() == [("web", 1), ("web", 2)]  # New is open work too (DESIGN 7.11)
    assert fold.configs["s1"] == "ab"


@pytest.mark.parametrize("claimed", [False, True])
def test_an_open_deployment_abandoned_fails_with_its_reason(claimed: bool) -> None:
    found = deployment()
    if claimed:
        found.claim("host-a", {})
    found.abandon("forked: log x at position 3", {})
    assert found.phase == phases.FAILED and found.reason == "forked: log x at position 3"
    with pytest.raises(IllegalTransition):
        found.abandon("again", {})


def test_a_timeout_still_needs_a_claim() -> None:
    with pytest.raises(IllegalTransition):
        deployment().time_out(5, {})
