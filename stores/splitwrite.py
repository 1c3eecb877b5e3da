"""Isolate the bad lines of a rejected line-protocol batch (failure-kinds.md #14).

InfluxDB answers a batch that holds one unwritable line (a field type conflict, a point outside
the retention policy, a parse error) with a client error for the whole request. Rewriting the
good lines is harmless -- a point with the same measurement, tag set and timestamp overwrites
itself -- so the batch is bisected until every rejected line stands alone; only those are lost
to the dead-letter path, each with the server's message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


class BatchRejected(Exception):
    """The server refused the batch because of its content (HTTP 400/413/422); ``message`` is its reason."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class RejectedLine:
    """A line the server refused on its own, and why (the server's message)."""

    line: str
    message: str


def write_split(lines: Sequence[str], send: Callable[[Sequence[str]], None]) -> list[RejectedLine]:
    """Write ``lines`` with ``send``; bisect on :class:`BatchRejected` down to single lines.

    Args:
        lines: line-protocol lines.
        send: writes lines, raising :class:`BatchRejected` when the content is refused; any other
            exception (e.g. ``StoreError`` for an unreachable server) propagates unchanged.

    Returns:
        The lines refused on their own (empty when everything was written).
    """
    if not lines:
        return []
    try:
        send(lines)
        return []
    except BatchRejected as exc:
        if len(lines) == 1:
            return [RejectedLine(lines[0], exc.message)]
    half = len(lines) // 2
    return write_split(lines[:half], send) + write_split(lines[half:], send)
