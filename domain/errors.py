"""Errors the domain raises when a command breaks one of its rules."""


class DomainError(Exception):
    """A command refused by a domain rule (the CLI exits 1)."""


class IllegalTransition(DomainError):
    """The deployment's phase does not allow this event."""


class NotFound(Exception):
    """No such config or revision (the CLI exits 4)."""
