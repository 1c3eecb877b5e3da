"""The identity ``(gateway, boot, seq)`` of imported readings, chosen so re-import adds nothing.

* ``gateway`` = ``"import"``: the readings did not come through the site's gateway.
* ``boot`` = ``"import-"`` + the first 16 hex digits of SHA-256 over ``site``, ``device``,
  ``quantity`` and ``unit``: one series per device and quantity, whatever file it came from.
* ``seq`` = the event time in microseconds since the Unix epoch.

So the identity is a function of *what* was measured and *when*, never of the file's name, path or
line numbers: importing the same file twice, the same file renamed or moved, a logger file that has
grown since the last import, or two downloads that overlap all store each reading once (SQLite:
the unique key; InfluxDB: the same measurement + tags + timestamp overwrites itself -- the two
sinks agree). A file has at most one reading per device, quantity and timestamp: rain rows that
share a timestamp are summed into one tip count (design-notes.md, "Delivery"); two *different*
values of another quantity at one timestamp are reported as ``conflicting_time``.

Limit (documented in docs/importing.md): tips of one timestamp split across two files (a download
cut inside a minute) are kept from the first file imported only.
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
