"""The bench's notification sink (bench/shared/sink_server.py) counts as delivered only what fully arrived."""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))  # the checkout, where `bench` is
from bench.shared.sink_server import SinkServer  # noqa: E402


def post(sink: SinkServer, body: bytes, length: int) -> None:
    """Send a POST whose headers announce `length` bytes, then `body`, then hang up (as a killed sender)."""
    port = sink.server.server_port
    head = f"POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: k\r\nContent-Length: {length}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(head.encode() + body)
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(5)
        while conn.recv(4096):
            pass


def test_a_request_cut_short_by_its_sender_is_not_delivered() -> None:
    whole = json.dumps({"position": 7}).encode()
    with SinkServer() as sink:
        post(sink, b"", len(whole))  # killed between its headers and its body
        post(sink, whole[:5], len(whole))  # killed in the middle of its body
        post(sink, whole, len(whole))
        deadline = time.monotonic() + 5
        while sink.ok_count < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [r.body for r in sink.delivered()] == [{"position": 7}]
        assert len(sink.received) == 1
