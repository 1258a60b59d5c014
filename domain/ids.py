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


@lru_cache(maxsize=REMEMBERED)
def template_id(name: str) -> UUID:
    """An analysis template (DESIGN 7.9)."""
    return uuid5(NAMESPACE_URL, f"/analysis/{name}")


def seal_id(log_id: str) -> UUID:
    """The stream of a log's seal (domain.log.LogSeal): named here, so a recorder's check for it loads no aggregate."""
    return uuid5(NAMESPACE_URL, f"/logs/{log_id}/seal")


def origin_id(log_id: str) -> UUID:
    """The stream of an imported log's origin (domain.log.LogOrigin)."""
    return uuid5(NAMESPACE_URL, f"/logs/{log_id}/origin")


def deployer_name(config: str, revision: int, attempt: int) -> str:
    return f"{config}-{revision}-deploy-{attempt}"


def hook_name(config: str, revision: int, hook: str, attempt: int, try_: int) -> str:
    base = f"{config}-{revision}-hook-{hook}-{attempt}"
    return base if try_ == 1 else f"{base}-{try_}"


def step_deployer_name(config: str, revision: int, attempt: int, step: int) -> str:
    """The deployer of rollout step `step` of a config with --steps (DESIGN 7.6)."""
    return f"{deployer_name(config, revision, attempt)}-step-{step}"


def measurement_name(config: str, revision: int, attempt: int, number: int) -> str:
    """Measurement `number` of an attempt (counted from 1, across its steps)."""
    return f"{config}-{revision}-verify-{attempt}-{number}"


def pause_name(config: str, revision: int, attempt: int, step: int, inconclusive: bool = False) -> str:
    """The pause after rollout step `step` (--step-pause), or in it when its measurements were inconclusive
    (both may come, one after the other, promoted past): names no process ever takes (a pause runs nothing)."""
    return f"{config}-{revision}-pause-{attempt}-{step}" + ("-inconclusive" if inconclusive else "")


def dashed(hex_id: str) -> str:
    """A UUID's usual text (what str(UUID(...)) gives, without building one) from its 32 hex digits, as the
    library stores them (dashed already: the same)."""
    h = hex_id.replace("-", "")
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
