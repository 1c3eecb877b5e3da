"""Names unique to one run of the suite, for MQTT client ids of persistent sessions.

A test's service keeps a persistent session (QoS 1, clean start off) on the shared test broker.
Under a fixed client id, the messages published for it after it stopped -- by the next test on the
same site, or by a failed run -- stay queued in that session and are delivered to the same test in
the next run on the same broker. An id unique to the run never meets an earlier run's session.
"""

from __future__ import annotations

import uuid

#: One token per test process (the same id inside a run: a test that restarts a service under one
#: id still finds its own session).
RUN = uuid.uuid4().hex[:8]


def run_unique(name: str) -> str:
    """``name`` made unique to this run of the suite (``name-<run token>``)."""
    return f"{name}-{RUN}"
