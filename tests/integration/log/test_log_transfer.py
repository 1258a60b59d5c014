"""Moving a log (7.3): export to JSON Lines, import into an empty store, on SQLite and PostgreSQL.

The file's checks; tests/integration/log/test_log_move.py has the seal, the fork and what each refuses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rollouts.adapters.store import chain
from tests.conftest import Rollouts

pytestmark = pytest.mark.slow  # real subprocesses and stores


def history(rollouts: Rollouts, marker: Path) -> None:
    command = ["sh", "-c", f'echo "$ROLLOUT_DEPLOYER" >> {marker}']
    assert rollouts.sh("config", "create", "web", "--env", "A=1", "--", *command).exit_code == 0
    for _ in range(2):
        assert rollouts.sh("rollout", "latest", "web", "--reason", "ship it").exit_code == 0
        assert rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0


def exported(rollouts: Rollouts, *args: str) -> list[dict]:
    result = rollouts.sh("log", "export", *args)
    assert result.exit_code == 0, result.stderr
    *events, end = [json.loads(line) for line in result.stdout.splitlines()]
    assert end == end_marker(events) | {"log_id": end["log_id"]}
    return events


def verified(rollouts: Rollouts) -> dict:
    return json.loads(rollouts.sh("log", "verify", "-o", "json").stdout)


def other(rollouts: Rollouts, tmp_path: Path, name: str, store: str | None) -> Rollouts:
    target = Rollouts(tmp_path / name, rollouts.cwd)
    if store:
        target.env["ROLLOUTS_STORE"] = target.store = store
    return target


def resigned(events: list[dict]) -> list[dict]:
    """`events` with every hash made again: a change a hash check alone would not catch."""
    previous = chain.ZERO
    for event in events:
        state = event["state"].encode()
        at = event["position"]
        previous = event["hash"] = chain.link(
            previous, event["stream"], event["stream_version"], event["topic"], state, at
        )
    return events


def end_marker(events: list[dict]) -> dict:
    """The line an export ends with, for these events."""
    last = events[-1] if events else {}
    fmt = last.get("chain", chain.POSITIONED)
    return {
        "end": True,
        "log_id": last.get("log_id"),
        "events": len(events),
        "head": last.get("position"),
        "chain": fmt,
    }


def lines_of(events: list[dict]) -> str:
    """An export of `events`, as `log export` writes one (its end marker last)."""
    return "".join(json.dumps(e) + "\n" for e in [*events, end_marker(events)])


def same_events(lines: list[str], others: list[str]) -> bool:
    """Whether two exports hold the same events (each log's lines name its own id)."""
    return [json.loads(line) | {"log_id": None} for line in lines] == [
        json.loads(line) | {"log_id": None} for line in others
    ]


def assert_refused_whole(rollouts: Rollouts, tmp_path: Path, events: list[dict]) -> None:
    """Importing `events` into a new home: exit 1, one `error: line N ...` line, nothing imported."""
    (tmp_path / "bad.jsonl").write_text(lines_of(events))
    target = other(rollouts, tmp_path, "target", None)
    result = target.sh("log", "import", str(tmp_path / "bad.jsonl"))
    assert result.exit_code == 1, result
    assert result.stderr.startswith("error: line ") and result.stderr.count("\n") == 1
    assert target.event_count() == 0


def test_a_log_moves_from_sqlite_to_postgres_and_back_with_the_same_hashes(
    rollouts: Rollouts, tmp_path: Path, postgres_url: str
) -> None:
    marker = tmp_path / "ran"
    history(rollouts, marker)
    before = verified(rollouts)
    source = exported(rollouts, "--seal")
    assert [e["position"] for e in source] == list(range(1, len(source) + 1))
    assert {"position", "stream", "stream_version", "type", "timestamp", "data", "meta", "hash"} <= set(source[0])
    assert source[-1]["type"] == "Sealed" and source[-1]["data"]["head"] == before["head"]
    (tmp_path / "log.jsonl").write_text(lines_of(source))

    pg = other(rollouts, tmp_path, "pg-home", postgres_url)
    result = pg.sh("log", "import", str(tmp_path / "log.jsonl"))
    assert result.exit_code == 0, result.stderr
    moved = exported(pg)
    # positions included: events name positions (a delivered notification's); only the log id is new
    assert [e | {"log_id": None} for e in moved[:-1]] == [e | {"log_id": None} for e in source]
    assert moved[-1]["type"] == "Origin" and moved[-1]["position"] == len(source) + 1
    sealed, after = verified(rollouts), verified(pg)
    assert after["events"] == sealed["events"] + 1 and after["log_id"] != sealed["log_id"]
    assert after["origin"] == {
        "log_id": sealed["log_id"],
        "head": sealed["head"],
        "head_hash": sealed["head_hash"],
        "fork": False,
    }

    # A controller on the imported store goes on from there: nothing of the old history runs again.
    assert pg.sh("rollout", "latest", "web").exit_code == 0
    assert pg.sh("controller", "run", "--until-idle", "--timeout", "30", "-q").exit_code == 0
    assert marker.read_text().split() == ["web-1-deploy-1", "web-2-deploy-1", "web-3-deploy-1"]
    assert pg.sh("rollout", "status", "web").stdout.strip() == "web version 3 (attempt 1): Complete"
    assert pg.sh("audit").exit_code == 0

    back = other(rollouts, tmp_path, "back-home", None)
    (tmp_path / "empty.jsonl").write_text("")
    empty = back.sh("log", "import", str(tmp_path / "empty.jsonl"))
    assert empty.exit_code == 1 and "no event" in empty.stderr
    piped = subprocess.run(
        [sys.executable, "-m", "rollouts", "log", "import", "-"],
        input=pg.sh("log", "export", "--seal").stdout,
        env=back.env,
        cwd=back.cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0, piped.stderr
    home_again = verified(back)
    assert home_again["origin"]["log_id"] == after["log_id"] and home_again["log_id"] not in (
        after["log_id"],
        sealed["log_id"],
    )


@pytest.mark.parametrize("change", ["data", "state", "drop", "swap", "hash"])
def test_a_changed_export_is_refused_whole(rollouts: Rollouts, tmp_path: Path, change: str) -> None:
    history(rollouts, tmp_path / "ran")
    lines = rollouts.sh("log", "export").stdout.splitlines()
    *events, _ = [json.loads(line) for line in lines]  # (lines_of writes the end marker again)
    if change == "data":
        events[3]["data"]["revision"] = 99
    elif change == "state":
        events[3]["state"] = events[3]["state"].replace('"revision":1', '"revision":9')
        events[3]["data"]["revision"] = 9
    elif change == "drop":
        del events[4]
    elif change == "swap":
        events[4], events[5] = events[5], events[4]
    else:
        events[6]["hash"] = "0" * 64
    assert_refused_whole(rollouts, tmp_path, events)


def test_import_into_a_store_that_is_not_empty_is_refused(rollouts: Rollouts, tmp_path: Path) -> None:
    history(rollouts, tmp_path / "ran")
    (tmp_path / "log.jsonl").write_text(rollouts.sh("log", "export").stdout)
    count = rollouts.event_count()
    result = rollouts.sh("log", "import", str(tmp_path / "log.jsonl"))
    assert result.exit_code == 1 and "not empty" in result.stderr
    assert rollouts.event_count() == count


def test_export_pages_by_position(rollouts: Rollouts, tmp_path: Path) -> None:
    history(rollouts, tmp_path / "ran")
    everything = exported(rollouts)
    assert [e["position"] for e in exported(rollouts, "--after", "3", "--until", "7")] == [4, 5, 6, 7]
    assert exported(rollouts, "--after", str(len(everything))) == []
    beyond = rollouts.sh("log", "export", "--after", str(len(everything) + 1))
    assert beyond.exit_code == 2 and "beyond the head" in beyond.stderr
    bad = rollouts.sh("log", "export", "--after", "5", "--until", "2")
    assert bad.exit_code == 2 and bad.stderr.startswith("error:")
    assert rollouts.sh("log", "export", "--after", "-1").exit_code == 2
    # A page is no log: its import says so, not that a line was changed (as its first hash reads)
    (tmp_path / "page.jsonl").write_text(rollouts.sh("log", "export", "--after", "3").stdout)
    target = other(rollouts, tmp_path, "target", None)
    refused = target.sh("log", "import", "--fork", str(tmp_path / "page.jsonl"))
    assert refused.exit_code == 1 and "starts past the log's first event" in refused.stderr, refused
    assert refused.stderr.startswith("error: line 1 (position 4): ") and target.event_count() == 0


@pytest.mark.parametrize("at", ["end", "middle"])
def test_a_refusal_after_several_batches_leaves_the_store_empty(tmp_path: Path, backend_store, at: str) -> None:
    """Import is one transaction: a bad line found after batches were inserted rolls all of them back."""
    from rollouts.adapters.home import Home
    from rollouts.adapters.service.application import new_meta
    from rollouts.adapters.service.bootstrap import open_app
    from rollouts.adapters.service.moves import seal
    from rollouts.adapters.store.transfer import ImportRefused, export_lines, load
    from rollouts.domain.spec import Spec

    source = open_app(Home(tmp_path / "source"), None)
    source.create_config("web", Spec(command=["true"]), new_meta("t"))
    for _ in range(12):
        source.latest("web", None, True, new_meta("t"))
    source.cancel("web", new_meta("t"))  # (a move carries no open work: a New deployment is some)
    seal(source, None, new_meta("t"))
    lines = [line.decode() for line in export_lines(source.recorder)]
    bad = len(lines) - 2 if at == "end" else len(lines) // 2  # (the last line is the end marker)
    changed = json.loads(lines[bad])
    changed["hash"] = "0" * 64  # a hash that no longer chains
    lines[bad] = json.dumps(changed)
    target = open_app(Home(tmp_path / "target"), backend_store)
    with pytest.raises(ImportRefused, match=f"line {bad + 1} "):
        load(target.recorder, lines, batch=3)
    assert target.recorder.max_notification_id() in (None, 0)
    assert [json.loads(line)["events"] for line in export_lines(target.recorder)] == [0]  # its end marker alone
    good = [line.decode() for line in export_lines(source.recorder)]
    assert load(target.recorder, good, batch=3).events == len(good) - 1  # the store still takes the good file
    # at the same positions, though a PostgreSQL sequence does not roll back (in a log of its own)
    assert same_events([line.decode() for line in export_lines(target.recorder)], good)


@pytest.mark.parametrize("change", ["gaps", "first"])
def test_an_imported_log_keeps_its_positions(tmp_path: Path, backend_store, change: str) -> None:
    """A PostgreSQL log's sequence skips the ids of failed inserts; events name positions (a sink's start,
    a delivered notification's): the target holds each event where the source did, and goes on after."""
    from rollouts.adapters.home import Home
    from rollouts.adapters.service.application import new_meta
    from rollouts.adapters.service.bootstrap import open_app
    from rollouts.adapters.service.moves import seal
    from rollouts.adapters.store.transfer import export_lines, load
    from rollouts.adapters.store.verify import verify_log
    from rollouts.domain.spec import Spec

    source = open_app(Home(tmp_path / "source"), None)
    source.create_config("web", Spec(command=["true"]), new_meta("t"))
    for _ in range(4):
        source.latest("web", None, True, new_meta("t"))
    source.cancel("web", new_meta("t"))  # (a move carries no open work: a New deployment is some)
    seal(source, None, new_meta("t"))
    *events, _ = [json.loads(line) for line in export_lines(source.recorder)]
    for n, event in enumerate(events):  # a log with gaps, as a sequence leaves them: each hash covers its position
        event["position"] = 10 * (n + 1) if change == "gaps" else 100 + n
    resigned(events)
    target = open_app(Home(tmp_path / "target"), backend_store)
    found = load(target.recorder, lines_of(events).splitlines(), batch=3)
    assert found.head == events[-1]["position"]
    assert same_events([line.decode() for line in export_lines(target.recorder)], lines_of(events).splitlines())
    report = verify_log(target.recorder)
    assert report.ok and (report.head, report.head_hash) == (events[-1]["position"], events[-1]["hash"])
    target.create_config("api", Spec(command=["true"]), new_meta("t"))  # (not sealed: the seal was the source's)
    last = events[-1]["position"]
    after = [json.loads(line).get("position") for line in export_lines(target.recorder, after=last)][:-1]
    assert after and after == list(range(last + 1, last + 1 + len(after)))


def craft(events: list[dict], change: str) -> list[dict]:
    """`events` with one change that the hashes, made again, do not show."""
    last = events[-1]
    if change == "naive timestamp":
        naive = last["timestamp"][:26]
        last["state"] = last["state"].replace(last["timestamp"], naive)
        last["timestamp"] = naive
    elif change == "no timestamp":
        last["state"] = last["state"].replace(last["timestamp"], "not-a-date")
        last["timestamp"] = "not-a-date"
    elif change == "unknown topic":
        last["topic"] = last["type"] = "os:system"
    elif change == "upper-case stream":
        for event in events:
            event["stream"] = event["stream"].upper()
    elif change == "a version twice":
        events.append(dict(last))
        events[-1]["position"] += 1
    elif change == "a huge version":
        last["stream_version"] = 2**70
    elif change == "the last position there is":  # no room to go on: SQLite put the next event below it
        last["position"] = 2**63 - 1
    return resigned(events)


@pytest.mark.parametrize(
    "change",
    [
        "naive timestamp",
        "no timestamp",
        "unknown topic",
        "upper-case stream",
        "a version twice",
        "a huge version",
        "the last position there is",
    ],
)
def test_an_export_changed_and_signed_again_is_refused_where_the_views_would_fail(
    rollouts: Rollouts, tmp_path: Path, change: str
) -> None:
    """A file whose hashes were made again over a change: refused (exit 1, nothing imported), where the
    views would fail on it (a time without an offset), act on what is no event of ours, or the store refuse it."""
    history(rollouts, tmp_path / "ran")
    assert_refused_whole(rollouts, tmp_path, craft(exported(rollouts), change))


def test_events_without_hashes_stay_unchained_where_they_are_imported(rollouts: Rollouts, tmp_path: Path) -> None:
    """Events a log held before its chain began come without hashes: the target does not chain them as if
    they had been, and says so as `log verify` on the source does."""
    history(rollouts, tmp_path / "ran")
    events = exported(rollouts)
    for event in events:
        event["hash"] = None
    (tmp_path / "unhashed.jsonl").write_text(lines_of(events))
    target = other(rollouts, tmp_path, "target", None)
    result = target.sh("log", "import", str(tmp_path / "unhashed.jsonl"))
    assert result.exit_code == 1 and "without its seal" in result.stderr  # (a backup: --fork makes it a log)
    result = target.sh("log", "import", "--fork", str(tmp_path / "unhashed.jsonl"))
    assert result.exit_code == 0 and f"({len(events)} written before the chain)" in result.stdout, result
    # and the origin, chained after them
    assert (verified(target)["events"], verified(target)["unchained"]) == (len(events) + 1, len(events))
    assert not verified(target)["ok"]  # DESIGN 7.1: an event without its chain record is a break, imported or not


def test_a_file_that_is_not_text_is_refused(rollouts: Rollouts, tmp_path: Path) -> None:
    (tmp_path / "random.bin").write_bytes(bytes(range(256)) * 64)
    result = rollouts.sh("log", "import", str(tmp_path / "random.bin"))
    assert result.exit_code == 1 and result.stderr.startswith("error: line 1: not UTF-8 text"), result
    assert rollouts.event_count() == 0


def test_a_long_sqlite_log_exported_in_parallel_parts_is_the_same_file(tmp_path: Path) -> None:
    """Export in worker processes (as for 100k events or more) gives the lines of one walk, in order;
    a damaged document in a part is still one StoreProblem (exit 5), not a crash."""
    import sqlite3

    from rollouts.adapters.home import Home
    from rollouts.adapters.service.application import new_meta
    from rollouts.adapters.service.bootstrap import open_app
    from rollouts.adapters.store import transfer as log_transfer
    from rollouts.domain.spec import Spec
    from rollouts.projections.records import UndecodableEvent

    app = open_app(Home(tmp_path / "source"), None)
    app.create_config("web", Spec(command=["true"]), new_meta("t"))
    for _ in range(25):
        app.latest("web", None, True, new_meta("t"))
    one_walk = list(log_transfer.export_lines(app.recorder))
    spans = log_transfer.SPAN
    try:
        log_transfer.SPAN = 7  # several parts, the last one short
        in_parts = list(log_transfer.export_lines(app.recorder, workers=2, smallest=1))
        assert in_parts == one_walk and len(one_walk) > 3 * log_transfer.SPAN
        part = list(log_transfer.export_lines(app.recorder, after=5, until=30, workers=2, smallest=1))
        assert part[:-1] == one_walk[5:30] and json.loads(part[-1])["head"] == 30
        with sqlite3.connect(tmp_path / "source" / "events.db") as db:
            db.execute("UPDATE stored_events SET state = X'FFFE' WHERE rowid = 20")
        with pytest.raises(UndecodableEvent, match="position 20"):
            list(log_transfer.export_lines(app.recorder, workers=2, smallest=1))
    finally:
        log_transfer.SPAN = spans
