"""Which sites a process owns, when several ``alerts`` (or ``ingest``) processes share a county.

Two ways, both decided by the site id alone (never by which other sites exist, so every process
agrees without talking to the others, and a site added to the directory goes to one process):

* ``--partition K/N`` -- part K (1..N) of N: the site's bucket is the jump consistent hash
  (Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm", 2014, arXiv:1406.2294) of
  the first 8 bytes of SHA-256 of its id, a bucket in 0..N-1; the process owns bucket K-1. Sites
  spread evenly, and going from N to N+1 processes moves only about 1/(N+1) of the sites (the
  ones the new process takes), never sites between the old processes.
* ``--site-id ID`` (repeatable) -- exactly these sites.

Every site is owned by exactly one of ``--partition 1/N`` ... ``--partition N/N``: N processes together
watch each site once, so together they publish exactly the events one process would (each site's
engine sees all of that site's readings and nothing else; tests/alerts/test_partitioned.py).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

#: ``K/N`` of ``--partition``.
_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def jump_hash(key: int, buckets: int) -> int:
    """Jump consistent hash of a 64-bit ``key`` into ``0 .. buckets-1`` (Lamping & Veach 2014, Figure 1).

    Raises:
        ValueError: ``buckets`` < 1.
    """
    if buckets < 1:
        raise ValueError(f"buckets must be >= 1, got {buckets}")
    b, j = -1, 0
    key &= 0xFFFFFFFFFFFFFFFF
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) & 0xFFFFFFFFFFFFFFFF
        j = int((b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b


def site_bucket(site_id: str, buckets: int) -> int:
    """The bucket (0 .. buckets-1) of a site id: :func:`jump_hash` of SHA-256 of its UTF-8 bytes."""
    key = int.from_bytes(hashlib.sha256(site_id.encode("utf-8")).digest()[:8], "big")
    return jump_hash(key, buckets)


@dataclass(frozen=True)
class Partition:
    """The sites of one process: part ``index`` (1-based) of ``count``, or an explicit set of ids.

    Attributes:
        index, count: ``K/N`` (``1/1``: every site).
        site_ids: when given, exactly these sites (``index``/``count`` ignored).
    """

    index: int = 1
    count: int = 1
    site_ids: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise ValueError(f"partition {self.index}/{self.count}: K must be 1..N")

    @classmethod
    def everything(cls) -> Partition:
        """Every site (one process)."""
        return cls()

    @classmethod
    def parse(cls, spec: str | None, site_ids: list[str] | None = None) -> Partition:
        """``--partition K/N`` and ``--site-id`` values as a partition (none given: every site).

        Raises:
            ValueError: a malformed ``K/N``, K outside 1..N, or both forms given (the message names the option).
        """
        if spec and site_ids:
            raise ValueError("give --partition K/N or --site-id, not both")
        if site_ids:
            return cls(site_ids=frozenset(site_ids))
        if not spec:
            return cls()
        match = _SPEC.match(spec)
        if match is None:
            raise ValueError(f"--partition {spec!r}: expected K/N, e.g. 2/4 (part 2 of 4)")
        index, count = int(match.group(1)), int(match.group(2))
        if not 1 <= index <= count:
            raise ValueError(f"--partition {spec!r}: K must be between 1 and N")
        return cls(index, count)

    @property
    def is_everything(self) -> bool:
        return self.site_ids is None and self.count == 1

    def owns(self, site_id: str) -> bool:
        """This process watches ``site_id``."""
        if self.site_ids is not None:
            return site_id in self.site_ids
        return self.count == 1 or site_bucket(site_id, self.count) == self.index - 1

    def describe(self) -> str:
        """``"every site"``, ``"part 2 of 4 (jump hash of the site id)"`` or ``"3 named sites"``."""
        if self.site_ids is not None:
            return f"{len(self.site_ids)} named site{'s' if len(self.site_ids) != 1 else ''}"
        if self.count == 1:
            return "every site"
        return f"part {self.index} of {self.count} (jump hash of the site id)"
