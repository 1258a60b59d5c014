"""The `rollouts` program's first step: `claim check` and the measurement process answered without the command
line's imports, every other command handed to adapters/cli.

A deployer runs `rollouts claim check` before each side effect (DESIGN 7.7), so its start-up is most of
its cost: click, pydantic and the application are not imported for it. Only the plain forms are taken
here (`claim check [CLAIM] [-o table|json]`, on $ROLLOUT_HOME and $ROLLOUT_STORE or the usual
ROLLOUTS_HOME and ROLLOUTS_STORE); anything else, `--help` or a global option included, goes the whole
way through click, to the same check (service/claims).

The controller starts each built-in provider's measurement as `python -m rollouts measure --resolved`
(DESIGN 7.9): that exact form runs adapters/analysis/process here, importing neither click nor pydantic.
"""

from __future__ import annotations

import sys

OUTPUTS = ("table", "json")


def main() -> None:
    args = sys.argv[1:]
    if args == ["measure", "--resolved"]:
        from .analysis.process import main as measure  # start-up cost: urllib3 and the providers, for this alone

        sys.exit(measure())
    plain = _plain_claim_check(args[2:]) if args[:2] == ["claim", "check"] else None
    if plain is None:
        from .cli import main as cli_main  # start-up cost: click and the commands

        cli_main()
        return
    from .service.claims import answer  # start-up cost: the store's modules, for this alone

    sys.exit(answer(*plain))


def _plain_claim_check(args: list[str]) -> tuple[str | None, str] | None:
    """(CLAIM or None, output) for the plain forms; None for anything else."""
    claim, output, rest = None, "table", list(args)
    while rest:
        arg = rest.pop(0)
        if arg in ("-o", "--output") and rest and rest[0] in OUTPUTS:
            output = rest.pop(0)
        elif arg.startswith("--output=") and arg.partition("=")[2] in OUTPUTS:
            output = arg.partition("=")[2]
        elif not arg.startswith("-") and claim is None:
            claim = arg
        else:
            return None
    return claim, output
