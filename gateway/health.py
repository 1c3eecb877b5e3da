"""Per-device health: report a failing device once, and back off its retries.

ERROR when a device goes bad, DEBUG for each further failure, INFO when it recovers
(failure-kinds.md #4, #5: a device that fails 50 times and then answers resumes by itself).
Backoff is counted in poll slots (clock time): after the n-th consecutive failure the device
skips ``min(2**(n-1) - 1, max_skip)`` slots -- 0, 1, 3, 7, 15, 15, ... -- while the devices on
other links keep their schedule.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class DeviceHealth:
    """Failure bookkeeping of one device.

    Args:
        device: device id (for messages).
        max_skip: most poll slots skipped between retries.
    """

    def __init__(self, device: str, max_skip: int = 15) -> None:
        self.device = device
        self.max_skip = max_skip
        self.failures = 0
        self.total_failures = 0

    def failed(self, error: Exception) -> int:
        """Record a failed poll; returns the poll slots to skip before the next attempt."""
        self.failures += 1
        self.total_failures += 1
        if self.failures == 1:
            log.error("device %s failing: %s (retrying with backoff; repeats logged at DEBUG)", self.device, error)
        else:
            log.debug("device %s still failing (%d in a row): %s", self.device, self.failures, error)
        skip: int = min(2 ** (self.failures - 1) - 1, self.max_skip)
        return skip

    def succeeded(self) -> None:
        """Record a good poll (logs the recovery once)."""
        if self.failures:
            log.info("device %s recovered after %d failed polls", self.device, self.failures)
        self.failures = 0
