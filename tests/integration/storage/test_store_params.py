"""A PostgreSQL URL's query parameters: `schema`, and libpq's own, honoured by every connection (the pool,
the LISTEN connection, a rebuild's reader); any other is refused (exit 2, naming it). DESIGN 7."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import psycopg
import pytest
from conftest import POSTGRES, Rollouts

from rollouts.adapters.service.bootstrap import bootstrap

pytestmark = pytest.mark.slow  # real PostgreSQL connections and subprocesses


def schema_exists(schema: str) -> bool:
    with psycopg.connect(POSTGRES) as conn:
        return conn.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone()[0] is not None  # type: ignore[index]


def sessions_named(name: str) -> int:
    with psycopg.connect(POSTGRES) as conn:
        found = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchone()
    return int(found[0])  # type: ignore[index]


def test_sslmode_require_against_a_server_without_tls_fails_instead_of_connecting(
    rollouts: Rollouts, postgres_url: str
) -> None:
    """It connected in plaintext: every parameter but `schema` was dropped."""
    schema = postgres_url.rsplit("=", 1)[1]
    store = postgres_url.replace("postgres@", "postgres:s3cret-pw@") + "&sslmode=require"
    result = rollouts.sh("config", "create", "web", "--", "true", env={"ROLLOUTS_STORE": store})
    assert result.exit_code == 5, result
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "SSL" in result.stderr
    assert "s3cret-pw" not in result.stderr + result.stdout
    assert not schema_exists(schema)  # nothing made on the server


@pytest.mark.parametrize("extra", ["&bogus=1", "&password=s3cret-pw", "&sslmode=disable&host=elsewhere"])
def test_an_unknown_parameter_is_a_usage_error_naming_it_and_nothing_is_created(
    rollouts: Rollouts, postgres_url: str, extra: str
) -> None:
    schema = postgres_url.rsplit("=", 1)[1]
    store = postgres_url.replace("postgres@", "postgres:s3cret-pw@") + extra
    unknown = extra.rsplit("&", 1)[1].split("=")[0]
    result = rollouts.sh("config", "create", "web", "--", "true", env={"ROLLOUTS_STORE": store})
    assert result.exit_code == 2, result
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert f"'{unknown}'" in result.stderr
    assert "s3cret-pw" not in result.stderr + result.stdout
    assert not rollouts.home.exists()
    assert not schema_exists(schema)


@pytest.mark.parametrize(
    ("extra", "named"),
    [("&sslmode=requir", "sslmode"), ("&connect_timeout=5s", "connect_timeout"), ("&target_session_attrs=x", "target")],
)
def test_a_parameter_libpq_would_refuse_is_a_usage_error_naming_it(
    rollouts: Rollouts, postgres_url: str, extra: str, named: str
) -> None:
    """libpq's own refusal came as a store that cannot be used (exit 5), after the home was made."""
    result = rollouts.sh("config", "list", env={"ROLLOUTS_STORE": postgres_url + extra})
    assert result.exit_code == 2, result
    assert result.stderr.startswith("error: ROLLOUTS_STORE: ") and named in result.stderr, result.stderr
    assert not rollouts.home.exists()


def test_application_name_reaches_every_connection(tmp_path: Path, postgres_url: str) -> None:
    """The pool's, the controller's LISTEN connection, and a rebuild's own reader each carry it."""
    name = f"rollouts_{uuid.uuid4().hex[:8]}"
    services = bootstrap(tmp_path / "home", f"{postgres_url}&application_name={name}&connect_timeout=7")
    app = services.open_app()
    try:
        app.recorder.max_notification_id()  # the pool's connections, kept open
        pooled = sessions_named(name)
        assert pooled >= 1
        listener = app.recorder.listener()
        assert listener is not None
        assert sessions_named(name) == pooled + 1
        log = app.recorder.rebuild_log()
        with psycopg.connect(log.conninfo) as reader:  # type: ignore[union-attr]
            assert reader.execute("SHOW application_name").fetchone() == (name,)
            assert sessions_named(name) == pooled + 2
        listener.close()
    finally:
        app.close()


def test_a_controller_on_the_store_shows_its_application_name(rollouts: Rollouts, postgres_url: str) -> None:
    name = f"rollouts_{uuid.uuid4().hex[:8]}"
    rollouts.env["ROLLOUTS_STORE"] = f"{postgres_url}&application_name={name}"
    assert rollouts.sh("config", "create", "web", "--", "true").exit_code == 0
    proc = rollouts.popen("controller", "run", "--timeout", "20")
    try:
        deadline = time.monotonic() + 15
        while sessions_named(name) == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sessions_named(name) >= 1
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
