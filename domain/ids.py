"""Deterministic ids and deployer names derived from natural keys."""

from uuid import NAMESPACE_URL, UUID, uuid5


def config_id(name: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/configs/{name}")


def deployment_id(config: UUID, revision: int) -> UUID:
    return uuid5(NAMESPACE_URL, f"/configs/{config}/deployments/{revision}")


def deployer_name(config: str, revision: int, attempt: int) -> str:
    return f"{config}-{revision}-deploy-{attempt}"


def hook_name(config: str, revision: int, hook: str, attempt: int, try_: int) -> str:
    base = f"{config}-{revision}-hook-{hook}-{attempt}"
    return base if try_ == 1 else f"{base}-{try_}"
