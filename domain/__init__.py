"""The rollout domain: configs, deployments and their rules; no I/O."""
