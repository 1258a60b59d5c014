"""The words a deployment's reasons and causes begin with, that rules and audits read back.

Kept apart from the aggregates so that a reader of the views (the audits, `--as-of`) needs
neither the library's aggregates nor pydantic to know them.
"""

from __future__ import annotations

CANCELLED = "cancelled"
ABORTED = "aborted"
AUTO_ROLLBACK = "automatic rollback to"  # the cause of a deployment the controller triggered after a failure
# A deployment failed because its name is held by a runtime row of another history (a binding refusal):
# it calls for no rollback. (executor._foreign words the reason so.)
FOREIGN = "no claim of this log made"
