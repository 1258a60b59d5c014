"""The service layer: every use case that writes (commands, claims, reports, rollbacks, leases, sinks, moves,
rebind), the audit report, and the policy each command runs under. Faces (CLI, web, controller) call it."""
