"""The prometheus provider against a real Prometheus (DESIGN 7.9): the measurement process as the controller
starts it, asking Debian's server that scrapes an app of the test's own every second."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.support.analysis_servers import Prometheus, free_port, measure, running_prometheus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """One Prometheus for the module (it takes seconds to start and to see its first samples)."""
    yield from running_prometheus(tmp_path_factory)


def test_a_query_before_the_first_scrape_is_empty_and_follows_on_empty(prometheus: Prometheus) -> None:
    early = prometheus.early  # measured at once after /-/ready: the first sample comes seconds later
    assert (early["default"].code, early["default"].document) == (
        2,
        {"outcome": "inconclusive", "value": None, "error": "empty result"},
    )
    assert early["default"].line == "inconclusive: value none: empty result"
    assert (early["passed"].code, early["passed"].line) == (0, "passed: value none")
    assert (early["failed"].code, early["failed"].line) == (1, "failed: value none")


def test_a_scalar_a_vector_of_one_and_several_samples(prometheus: Prometheus) -> None:
    prometheus.wait_for_samples()
    scalar = measure(
        {"provider": "prometheus", "address": prometheus.address, "query": "0.004", "success": "result < 0.01"}
    )
    assert (scalar.code, scalar.line, scalar.document["value"]) == (0, "passed: value 0.004", 0.004)
    one = {"provider": "prometheus", "address": prometheus.address, "query": "demo_value", "success": "result < 1"}
    failed = measure(one)
    assert (failed.code, failed.line) == (1, "failed: value 12")
    assert failed.document == {"outcome": "failed", "value": 12, "error": None}
    several = measure(
        {
            "provider": "prometheus",
            "address": prometheus.address,
            "query": "sort(demo_series)",
            "success": "len(result) == 3 and max(result) < 4",
        }
    )
    assert (several.code, several.line, several.document["value"]) == (0, "passed: value [1, 2, 3.5]", [1, 2, 3.5])


def test_nan_is_inconclusive_and_written_as_prometheus_writes_it(prometheus: Prometheus) -> None:
    prometheus.wait_for_samples()
    nan = measure(
        {"provider": "prometheus", "address": prometheus.address, "query": "demo_nan", "success": "result < 1"}
    )
    assert (nan.code, nan.line) == (2, "inconclusive: value NaN: the result is NaN")
    assert nan.document == {"outcome": "inconclusive", "value": "NaN", "error": "the result is NaN"}


def test_a_bad_query_is_inconclusive_with_prometheus_own_error(prometheus: Prometheus) -> None:
    bad = measure({"provider": "prometheus", "address": prometheus.address, "query": "sum(", "success": "result > 0"})
    assert bad.code == 2 and bad.document["outcome"] == "inconclusive"
    error = str(bad.document["error"])
    assert error.startswith("the query failed: bad_data: ") and "parse error" in error
    assert prometheus.address not in bad.stdout + bad.stderr


def test_the_address_from_a_variable_is_read_then_and_never_shown(prometheus: Prometheus) -> None:
    """A secret address (a password in it) works from $PROM_URL; unreachable, the error names the variable."""
    prometheus.wait_for_samples()
    template = {"provider": "prometheus", "address_env": "PROM_URL", "query": "demo_value", "success": "result > 1"}
    secret = prometheus.address.replace("http://", "http://reader:s3cret-pw@")
    ok = measure(template, env={"PROM_URL": secret})
    assert (ok.code, ok.line) == (0, "passed: value 12")
    nobody = f"http://reader:s3cret-pw@127.0.0.1:{free_port()}"
    refused = measure(template, env={"PROM_URL": nobody})
    assert (refused.code, refused.line) == (
        2,
        "inconclusive: value none: cannot reach the address in $PROM_URL: connection refused",
    )
    assert "s3cret" not in refused.stdout + refused.stderr and "127.0.0.1" not in refused.stdout + refused.stderr
    unset = measure(template)
    assert (unset.code, unset.document["error"]) == (2, "$PROM_URL is not set")


@pytest.fixture
def silent() -> Iterator[str]:
    """An address that accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_a_server_that_does_not_answer_in_time_is_inconclusive(silent: str) -> None:
    slow = measure({"provider": "prometheus", "address": silent, "query": "up", "timeout": 1})
    assert (slow.code, slow.line) == (
        2,
        "inconclusive: value none: no answer from the address within the timeout of 1 s",
    )
    assert slow.seconds < 5
