"""The kinds of error the project raises on purpose; the CLI gives each kind its exit code (adapters/cli/errors.py).

Every layer raises a subclass of one of these kinds, defined near the code that raises it
(`WriteConflict` beside the application, `StoreUnavailable` beside the event store). Anything
else that reaches the CLI is a bug, reported as one.
"""


class RolloutsError(Exception):
    """An error the program expects and can explain in one line."""


class UsageError(RolloutsError):
    """The command line asked for something that cannot be (the CLI exits 2)."""


class DomainError(RolloutsError):
    """A command refused by a domain rule (the CLI exits 1)."""


class IllegalTransition(DomainError):
    """The deployment's phase does not allow this event."""


class Conflict(RolloutsError):
    """A write that still conflicted after its retries, a lock held too long included (the CLI exits 3)."""


class NotFound(RolloutsError):
    """No such config or revision (the CLI exits 4)."""


class StoreProblem(RolloutsError):
    """The store or the home cannot be reached or used, or holds what cannot be read (the CLI exits 5)."""
