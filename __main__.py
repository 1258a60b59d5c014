"""`python -m rollouts`: the command line, as the `rollouts` script runs it."""

from rollouts.adapters.cli import main

main()
