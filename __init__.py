"""Rollouts: an event-sourced rollout controller that never runs a deployer twice.

One import name: `rollouts.domain` (the rules, no I/O), `rollouts.projections` (the read
models) and `rollouts.adapters` (the CLI, the controller, the stores and the runtime).
"""
