"""The ingest process's garbage-collector settings for a steady stream of short-lived readings.

A reading's objects (decoded fields, tuples, line text) are freed by reference counting; they form
no cycles. With CPython's defaults (a young-generation pass every 700 allocations, a full pass as the
heap grows) the collector walks the batch in flight and the duplicate memory again and again: a
quarter of ingest's CPU per reading in docs/scaling.md ("### Ingest"). Start-up objects are moved out
of the collector's sight (``gc.freeze``) and the young generation is collected every 20,000 allocations.
"""

from __future__ import annotations

import gc

#: (young, middle, old) thresholds of :func:`gc.set_threshold` while ingest runs.
THRESHOLDS = (20_000, 20, 100)


def steady_heap() -> None:
    """Collect once, freeze what start-up made, and raise the thresholds (call once, after start-up;
    only in the ``stormwatch ingest`` process, never in a library caller's)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
