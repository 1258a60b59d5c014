"""Signed checkpoints: a log's head (log id, position, hash, time) signed with an Ed25519 key.

The text is a signed note as C2SP describes it (https://c2sp.org/signed-note), with a body
shaped like a transparency log's checkpoint (https://c2sp.org/tlog-checkpoint):

    rollouts log 6f1c...            <- origin: names the log by its id
    1200                            <- the position of the head (a checkpoint's "tree size")
    XoiY2i...=                      <- the chain's hash at that position, base64 (its "root hash")
    time 2026-12-06T04:30:00Z       <- extension line: when it was signed
    hash 5e8848...                  <- extension line: the same hash in hex, as `log verify` prints it

    — auditor@example AbCd...       <- signature line: key name, base64(key id || signature)

Where it differs from a transparency log's checkpoint: the position counts events of a hash
chain, not leaves of a Merkle tree, and the hash is the chain's value there, not a Merkle root;
so a checkpoint proves a prefix of the log by re-walking the chain, not by an inclusion proof.
The key id is the note format's (the first 4 bytes of SHA-256 of name, newline, 0x01, public key).
The cryptography package signs and verifies; nothing here is crypto of our own.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ORIGIN = "rollouts log "
ED25519 = b"\x01"  # the note format's signature type for Ed25519
DASH = "\u2014 "  # a signature line starts with an em dash and a space
_NAME = re.compile(r"[^\s+]+")


class CheckpointError(ValueError):
    """A checkpoint or key that cannot be used; the message says why, for one `error:` line."""


@dataclass(frozen=True)
class Checkpoint:
    log_id: str
    position: int
    hash: str  # hex, as `log verify` prints it
    time: datetime
    key_name: str

    def body(self) -> str:
        digest = base64.b64encode(bytes.fromhex(self.hash)).decode()
        stamp = self.time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"{ORIGIN}{self.log_id}\n{self.position}\n{digest}\ntime {stamp}\nhash {self.hash}\n"


def private_key(pem: bytes) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as error:
        raise CheckpointError(f"not an unencrypted PEM private key: {error}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise CheckpointError("not an Ed25519 key (openssl genpkey -algorithm ed25519 makes one)")
    return key


def public_key(pem: bytes) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as error:
        raise CheckpointError(f"not a PEM public key: {error}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise CheckpointError("not an Ed25519 public key (openssl pkey -pubout makes one from the private key)")
    return key


def key_id(name: str, key: Ed25519PublicKey) -> bytes:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(name.encode() + b"\n" + ED25519 + raw).digest()[:4]


def sign(checkpoint: Checkpoint, key: Ed25519PrivateKey) -> str:
    """The signed note: the body, an empty line, one signature line."""
    if not _NAME.fullmatch(checkpoint.key_name):
        raise CheckpointError(f"key name {checkpoint.key_name!r} must be one word without '+'")
    body = checkpoint.body()
    signature = key_id(checkpoint.key_name, key.public_key()) + key.sign(body.encode())
    return f"{body}\n{DASH}{checkpoint.key_name} {base64.b64encode(signature).decode()}\n"


def verified(text: str, key: Ed25519PublicKey) -> Checkpoint:
    """The checkpoint TEXT states, if a signature line in it is KEY's and good; else CheckpointError."""
    body, sep, signatures = text.rpartition("\n\n")
    if not sep:
        raise CheckpointError("not a signed checkpoint: no empty line before its signatures")
    body += "\n"
    lines = body.splitlines()
    if len(lines) < 5 or not lines[0].startswith(ORIGIN):
        raise CheckpointError(f"not a rollouts checkpoint: its first line is not '{ORIGIN}LOG_ID'")
    for line in signatures.splitlines():
        if not line.startswith(DASH):
            raise CheckpointError(f"not a signature line: {line[:60]!r}")
        name, _, encoded = line[len(DASH) :].rpartition(" ")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except ValueError:
            raise CheckpointError(f"the signature of {name!r} is not base64") from None
        if len(raw) != 68 or raw[:4] != key_id(name, key):
            continue  # another key's signature
        try:
            key.verify(raw[4:], body.encode())
        except InvalidSignature:
            raise CheckpointError(f"the signature of {name!r} is not good for this checkpoint and key") from None
        return _parsed(lines, name)
    raise CheckpointError("no signature of this key on the checkpoint")


def _parsed(lines: list[str], name: str) -> Checkpoint:
    extensions = dict(line.split(" ", 1) for line in lines[3:] if " " in line)
    try:
        position = int(lines[1]) if lines[1].isascii() and lines[1].isdigit() else -1
        digest = base64.b64decode(lines[2], validate=True).hex()
        time = datetime.strptime(extensions["time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except (ValueError, KeyError):
        raise CheckpointError("a signed checkpoint whose position, hash or time cannot be read") from None
    if position < 0 or len(digest) != 64:
        raise CheckpointError("a signed checkpoint whose position or hash cannot be read")
    return Checkpoint(lines[0][len(ORIGIN) :], position, digest, time, name)
