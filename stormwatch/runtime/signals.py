"""How a long-running service stops on a signal: SIGTERM and SIGINT both call its stop.

SIGINT is installed explicitly rather than left to Python's KeyboardInterrupt: a service started in
the background from a script inherits SIGINT *ignored* (POSIX shells do that for ``cmd &``), and
would otherwise never stop on Ctrl-C or ``kill -INT``. Design: docs/runtime.md.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable

__all__ = ["stop_on_signals"]

log = logging.getLogger(__name__)


def stop_on_signals(stop: Callable[[], object], what: str) -> None:
    """Call ``stop`` (in a thread of its own: a stop that waits must not block the signal handler)
    on SIGTERM or SIGINT; logged at INFO as ``signal N: stopping <what>``. Only from the main thread
    (where Python runs handlers); elsewhere, nothing."""
    if threading.current_thread() is not threading.main_thread():
        return

    def _on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping %s", signum, what)
        threading.Thread(target=stop, daemon=True, name=f"stop-{what}").start()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
