"""What every event carries of the command that caused it (DESIGN 3): `Meta`, the one name for it."""

from __future__ import annotations

from typing import Any

# Who asked (`actor`), the command's `correlation` id, and for the controller's events the notification id it
# acted on; a plain mapping, as the event stores it (its keys are read where they matter: approval.Who.of).
Meta = dict[str, Any]
