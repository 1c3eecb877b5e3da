"""The one way tests wait for something another thread or process does: :func:`wait_until`.

Tests never sleep a fixed time hoping the other side is done: they wait on the condition itself,
with a generous deadline (a loaded 2-core machine is slow, never wrong).
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Default deadline (real seconds) of a wait.
DEFAULT_TIMEOUT_S = 10.0


def wait_until(cond: Callable[[], object], timeout_s: float = DEFAULT_TIMEOUT_S, what: str = "condition", *,
               every_s: float = 0.02, fail: bool = True, ignore: tuple[type[BaseException], ...] = ()) -> bool:
    """Poll ``cond`` every ``every_s`` real seconds until it is truthy or ``timeout_s`` passes.

    Args:
        cond: the condition; exceptions of the types in ``ignore`` count as "not yet" (e.g. a page
            element replaced while it was read).
        timeout_s: the deadline in real seconds.
        what: named in the timeout error.
        every_s: polling period.
        fail: raise on timeout (default) or return ``False``.

    Returns:
        ``True`` when the condition held (``False`` on timeout with ``fail=False``).

    Raises:
        AssertionError: the deadline passed (``fail=True``), naming ``what`` and the deadline.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if cond():
                return True
        except ignore:
            pass
        if time.monotonic() >= deadline:
            if fail:
                raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
            return False
        time.sleep(every_s)
