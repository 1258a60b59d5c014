"""`python -m rollouts`."""

from . import main

main()
