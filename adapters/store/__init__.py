"""The event store wing: the port every caller types against, each backend behind it, and what works
on a whole log (the hash chain, verify, checkpoints, export and import, preload, the home's binding)."""
