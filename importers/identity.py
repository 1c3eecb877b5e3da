"""The identity ``(gateway, boot, seq)`` of imported readings, chosen so re-import adds nothing.

* ``gateway`` = ``"import"``: the readings did not come through the site's gateway.
* ``boot`` = ``"import-"`` + the first 16 hex digits of SHA-256 over ``site``, ``device``,
  ``quantity`` and ``unit``: one series per device and quantity, whatever file it came from.
* ``seq`` = the event time in microseconds since the Unix epoch.

The design: docs/importing.md ("The modules", `importers/identity.py`).
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from stormwatch.stores.lineprotocol import time_ns

#: The ``gateway`` of every imported reading.
IMPORT_GATEWAY = "import"


def import_boot(site: str, device: str, quantity: str, unit: str) -> str:
    """The ``boot`` of imported readings of one device's quantity (stable across runs)."""
    digest = hashlib.sha256("\x00".join((site, device, quantity, unit)).encode("utf-8")).hexdigest()
    return f"import-{digest[:16]}"


def import_seq(time: datetime) -> int:
    """The ``seq`` of an imported reading: its event time in whole microseconds since 1970 (UTC).

    Raises:
        ValueError: a time before 1970 (``seq`` is non-negative).
    """
    us = time_ns(time) // 1_000
    if us < 0:
        raise ValueError(f"event time {time.isoformat()} is before 1970")
    return us
