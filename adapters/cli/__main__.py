"""`python -m rollouts`."""

from rollouts.adapters.cli import main

main()
