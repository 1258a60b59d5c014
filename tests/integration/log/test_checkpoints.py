"""Signed checkpoints (DESIGN 7.8): a head signed with an Ed25519 key that openssl made proves, later and
offline, that the history up to it was not rewritten, even by someone who re-chains the whole log."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from rollouts.adapters.store import chain
from tests.conftest import Rollouts

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


def keys(folder: Path, name: str = "auditor", algorithm: str = "ed25519") -> tuple[Path, Path]:
    private, public = folder / f"{name}.pem", folder / f"{name}.pub.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", algorithm, "-out", private], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", private, "-pubout", "-out", public], check=True, capture_output=True)
    return private, public


def history(rollouts: Rollouts) -> None:
    rollouts.run("config", "create", "web", "--", "true")
    for _ in range(3):
        assert rollouts.run("rollout", "latest", "web", "--supersede").exit_code == 0


def rewrite_and_rechain(home: Path) -> None:
    """What someone with the file can do: change an event, then recompute every hash after it."""
    with sqlite3.connect(home / "events.db") as conn:
        conn.execute(
            "UPDATE stored_events SET state = CAST(REPLACE(CAST(state AS TEXT), 'tester@test', 'mallory@evl')"
            " AS BLOB) WHERE rowid = 2"
        )
        rows = conn.execute("SELECT rowid, originator_id, originator_version, topic, state FROM stored_events")
        hashes = list(chain.hashes_after(chain.ZERO, rows.fetchall(), chain.POSITIONED))
        conn.executemany(
            "UPDATE rollouts_chain SET hash = ? WHERE position = ?", [(h, i + 1) for i, h in enumerate(hashes)]
        )


def test_a_checkpoint_holds_on_the_log_it_was_made_of(rollouts_on: Rollouts, tmp_path: Path) -> None:
    private, public = keys(tmp_path)
    history(rollouts_on)
    made = rollouts_on.sh("log", "checkpoint", "--key", str(private), "--name", "auditor@example")
    assert made.exit_code == 0, made.stderr
    body, _, signature = made.stdout.partition("\n\n")
    log_id = rollouts_on.run("log", "verify", "-o", "json").stdout
    assert body.splitlines()[0].startswith("rollouts log ") and body.splitlines()[0][13:] in log_id
    assert signature.startswith("\u2014 auditor@example ")
    (tmp_path / "web.checkpoint").write_text(made.stdout)
    document = json.loads(rollouts_on.sh("log", "checkpoint", "--key", str(private), "-o", "json").stdout)
    assert document["checkpoint"].splitlines()[:2] == made.stdout.splitlines()[:2]
    assert document["position"] == int(made.stdout.splitlines()[1]) and len(document["hash"]) == 64
    rollouts_on.run("rollout", "latest", "web", "--supersede")  # the log goes on: the checkpoint still holds
    checked = rollouts_on.sh("log", "verify", "--checkpoint", str(tmp_path / "web.checkpoint"), "--pubkey", str(public))
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    assert "signed by auditor@example" in checked.stdout and checked.stdout.rstrip().endswith("holds")


def test_a_rewritten_and_rechained_log_fails_its_checkpoint(rollouts: Rollouts, tmp_path: Path) -> None:
    private, public = keys(tmp_path)
    history(rollouts)
    (tmp_path / "cp").write_text(rollouts.sh("log", "checkpoint", "--key", str(private)).stdout)
    rewrite_and_rechain(rollouts.home)
    assert rollouts.sh("log", "verify").exit_code == 1  # this home saw the old head: it tells
    elsewhere = Rollouts(tmp_path / "auditor", rollouts.cwd)  # an auditor's copy of the log, no home's memory
    elsewhere.home.mkdir()
    with sqlite3.connect(rollouts.home / "events.db") as source, sqlite3.connect(elsewhere.home / "events.db") as copy:
        source.backup(copy)  # the WAL's pages too
    assert elsewhere.sh("log", "verify").exit_code == 0  # the chain alone cannot tell: it was recomputed
    checked = elsewhere.sh("log", "verify", "--checkpoint", str(tmp_path / "cp"), "--pubkey", str(public))
    assert checked.exit_code == 1
    assert "checkpoint" in checked.stdout and "has another hash" in checked.stdout


def test_a_truncated_log_fails_its_checkpoint(rollouts: Rollouts, tmp_path: Path) -> None:
    private, public = keys(tmp_path)
    history(rollouts)
    (tmp_path / "cp").write_text(rollouts.sh("log", "checkpoint", "--key", str(private)).stdout)
    with sqlite3.connect(rollouts.home / "events.db") as conn:
        head = conn.execute("SELECT max(rowid) FROM stored_events").fetchone()[0]
        conn.execute("DELETE FROM stored_events WHERE rowid = ?", (head,))
        conn.execute("DELETE FROM rollouts_chain WHERE position = ?", (head,))
    checked = rollouts.sh("log", "verify", "--checkpoint", str(tmp_path / "cp"), "--pubkey", str(public))
    assert checked.exit_code == 1 and f"checkpoint {head} is gone" in checked.stdout


def test_a_forged_or_foreign_checkpoint_is_refused(rollouts: Rollouts, tmp_path: Path) -> None:
    private, public = keys(tmp_path)
    _, other_public = keys(tmp_path, "other")
    history(rollouts)
    text = rollouts.sh("log", "checkpoint", "--key", str(private)).stdout
    (tmp_path / "cp").write_text(text)
    lines = text.splitlines(keepends=True)
    lines[1] = "2\n"  # an earlier position, as if the log were shorter when it was signed
    (tmp_path / "forged").write_text("".join(lines))
    for checkpoint, key, why in (
        ("cp", other_public, "no signature of this key"),
        ("forged", public, "is not good for this checkpoint"),
    ):
        checked = rollouts.sh("log", "verify", "--checkpoint", str(tmp_path / checkpoint), "--pubkey", str(key))
        assert checked.exit_code == 1 and why in checked.stderr, checked.stderr


def test_bad_keys_and_half_options_are_usage_errors(rollouts: Rollouts, tmp_path: Path) -> None:
    """A key file that is not the right key is the caller's mistake (exit 2), never a BROKEN log (exit 1)."""
    rsa, _ = keys(tmp_path, "rsa", "rsa")
    private, public = keys(tmp_path)
    history(rollouts)
    (tmp_path / "cp").write_text(rollouts.sh("log", "checkpoint", "--key", str(private)).stdout)
    checkpoint = ["log", "verify", "--checkpoint", str(tmp_path / "cp"), "--pubkey"]
    for args, why in (
        (["log", "checkpoint", "--key", str(rsa)], "not an Ed25519 key"),
        (["log", "verify", "--checkpoint", str(rsa)], "--checkpoint and --pubkey go together"),
        ([*checkpoint, str(private)], "not a PEM public key"),  # the private key, by mistake
        ([*checkpoint, str(tmp_path / "cp")], "not a PEM public key"),
    ):
        refused = rollouts.sh(*args)
        assert refused.exit_code == 2 and why in refused.stderr and "Traceback" not in refused.stderr
