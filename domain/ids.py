"""Deterministic ids and deployer names derived from natural keys."""

from functools import lru_cache
from uuid import NAMESPACE_URL, UUID, uuid5

# A controller's pass derives the same ids many times (a SHA-1 and a UUID each): remembered, within bounds.
REMEMBERED = 4096


@lru_cache(maxsize=REMEMBERED)
def config_id(name: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/configs/{name}")


@lru_cache(maxsize=REMEMBERED)
def deployment_id(config: UUID, revision: int) -> UUID:
    return uuid5(NAMESPACE_URL, f"/configs/{config}/deployments/{revision}")


def deployer_name(config: str, revision: int, attempt: int) -> str:
    return f"{config}-{revision}-deploy-{attempt}"


def hook_name(config: str, revision: int, hook: str, attempt: int, try_: int) -> str:
    base = f"{config}-{revision}-hook-{hook}-{attempt}"
    return base if try_ == 1 else f"{base}-{try_}"
