"""Fewer cyclic garbage collections during a long batch of short-lived, acyclic objects.

A backfill (:func:`stormwatch.alerts.backfill.evaluate`) makes a tuple per stored reading --
2.1 million for a one-year report of one site (``benchmarks/report.py``) -- and frees each day's
after the rules have read them; none is part of a reference cycle. CPython's cyclic collector
counts them anyway: a young-generation pass every 700 container allocations, and an oldest-generation
pass (every live object, the report's growing results included) whenever the survivors grow by a
quarter. That was 1 to 2 s of CPU in the benchmark's report. :func:`fewer_collections` raises the
young generation's threshold for the batch and puts it back after: cycles are still found, less often.
The threshold counts objects, not bytes: a young generation of 100,000 small containers is a few MB.

The design: docs/runtime.md ("The modules", `stormwatch/runtime/gcbatch.py`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Container allocations (net of frees) between young-generation collections during a batch
#: (CPython's default: 700).
BATCH_THRESHOLD = 100_000


@contextmanager
def fewer_collections(threshold: int = BATCH_THRESHOLD) -> Iterator[None]:
    """Within the ``with`` block, collect the young generation after ``threshold`` net container
    allocations instead of CPython's 700 (never fewer than the current setting); the thresholds
    are restored on leaving, exception or not. Not for concurrent use from threads that set
    their own thresholds (the collector's settings are the interpreter's)."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], threshold), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
