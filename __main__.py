"""`python -m rollouts`: the command line, as the `rollouts` script runs it."""

from .adapters.entry import main

main()
