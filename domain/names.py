"""Config names (DNS-1123 labels) and hook limits: plain rules, no pydantic, cheap to import."""

import re

NAME_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
HOOK_TRIES = 3


def validate_name(name: str) -> str:
    """Return `name` if it is a DNS-1123 label of at most 63 characters."""
    if len(name) > 63 or not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"invalid name {name[:80]!r}: must be a DNS-1123 label "
            "(lowercase letters, digits and '-', at most 63 characters)"
        )
    return name
