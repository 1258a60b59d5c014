"""`python -m rollouts`: the command line, as the `rollouts` script runs it."""

from rollouts.adapters.entry import main

main()
