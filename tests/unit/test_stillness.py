"""`logs -f`'s watch: it speaks once when neither the deployment nor any controller moved for a while."""

from __future__ import annotations

from rollouts.adapters.cli.stillness import Stillness


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def watch(lease_age: float | None = None) -> tuple[Stillness, Clock, list[int]]:
    clock, asked = Clock(), [0]

    def age() -> float | None:
        asked[0] += 1
        return lease_age

    return Stillness(10, age, clock), clock, asked


def test_it_says_once_after_the_seconds_with_no_change_and_no_controller_ever() -> None:
    still, clock, _ = watch()
    assert still.check("row") is None
    clock.t += 9.9
    assert still.check("row") is None
    clock.t += 0.2
    said = still.check("row")
    assert said is not None and "for 10s" in said and "no controller ever ran" in said
    clock.t += 30
    assert still.check("row") is None  # not again while nothing moves


def test_a_change_of_the_deployment_starts_the_count_again_and_may_say_again() -> None:
    still, clock, _ = watch()
    still.check("a")
    clock.t += 11
    assert still.check("a") is not None
    assert still.check("b") is None  # an event moved it
    clock.t += 9
    assert still.check("b") is None
    clock.t += 2
    assert still.check("b") is not None


def test_a_controller_that_renewed_its_lease_lately_keeps_it_quiet() -> None:
    still, clock, _ = watch(lease_age=1.0)
    still.check("row")
    for _ in range(10):
        clock.t += 11
        assert still.check("row") is None


def test_a_silent_lease_is_named_with_its_age() -> None:
    still, clock, _ = watch(lease_age=45.0)
    still.check("row")
    clock.t += 12
    said = still.check("row")
    assert said is not None and "no controller lease renewed for 45s" in said


def test_the_store_is_asked_only_once_the_deployment_was_still_for_the_seconds() -> None:
    still, clock, asked = watch(lease_age=0.0)
    for _ in range(49):
        clock.t += 0.2
        still.check("row")
    assert asked[0] == 0
    clock.t += 0.4
    still.check("row")
    assert asked[0] == 1
