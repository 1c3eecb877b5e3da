"""One series' stored rows kept as columns (:class:`SeriesRows`): what a backfill reads most.

A year of 1-minute readings of a site is 2.1 million :data:`~stormwatch.stores.base.StoredRow`
tuples of eight fields (``benchmarks/report.py``). Nearly every series of a day has one unit, one
gateway, one boot and one tip size, no quality flag and no instant twice: its rows differ only in
time, value and sequence number. :class:`SeriesRows` keeps those three columns and the four shared
texts once, and is a :class:`~collections.abc.Sequence` of the very tuples the rows would be --
built only when a consumer indexes or iterates it. The rules' fast paths read the columns
(:attr:`SeriesRows.times`, :attr:`SeriesRows.values`) and never make the tuples: a report of a
year builds none of the 2.1 million, nor loads them from the reading process.

Standard library only: the SQLite reading process (:mod:`stormwatch.stores.sqlite_reader`) imports
nothing else.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, overload

from stormwatch.stores.base import ROW_TIME

if TYPE_CHECKING:
    from stormwatch.stores.base import StoredRow

_TIME = operator.itemgetter(ROW_TIME)  # of a StoredRow


class SeriesRows(Sequence["StoredRow"]):
    """The rows of one series of one window whose unit, gateway, boot and tip size are those of
    every row, none flagged and no instant twice, in time order (the engine's order).

    Args:
        times: event times, integer µs since the Unix epoch, strictly increasing.
        values: the readings' values (``int`` for whole tips, else ``float``), one per time.
        seqs: the gateways' sequence numbers, one per time.
        unit, gateway, boot, tip_size: shared by every row (``tip_size`` ``""``: none stored).

    ``rows[i]`` is ``(times[i], values[i], unit, "", gateway, boot, seqs[i], tip_size)``, the
    :data:`~stormwatch.stores.base.StoredRow` (flags ``""``: none); a slice is a list of them. A
    :class:`SeriesRows` equals any sequence of the same rows (a ``list`` of them included).

    Raises:
        ValueError: the columns are not of one length.
    """

    __slots__ = ("boot", "gateway", "seqs", "times", "tip_size", "unit", "values")

    def __init__(self, times: list[int], values: list[Any], seqs: list[int], unit: str, gateway: str, boot: str,
                 tip_size: str) -> None:
        if not len(times) == len(values) == len(seqs):
            raise ValueError(f"columns of {len(times)} times, {len(values)} values and {len(seqs)} sequence numbers")
        self.times, self.values, self.seqs = times, values, seqs
        self.unit, self.gateway, self.boot, self.tip_size = unit, gateway, boot, tip_size

    def __len__(self) -> int:
        return len(self.times)

    @overload
    def __getitem__(self, i: int) -> StoredRow: ...

    @overload
    def __getitem__(self, i: slice) -> list[StoredRow]: ...

    def __getitem__(self, i: int | slice) -> StoredRow | list[StoredRow]:
        if isinstance(i, slice):
            return list(self._rows(self.times[i], self.values[i], self.seqs[i]))
        return (self.times[i], self.values[i], self.unit, "", self.gateway, self.boot, self.seqs[i], self.tip_size)

    def __iter__(self) -> Iterator[StoredRow]:
        return self._rows(self.times, self.values, self.seqs)

    def _rows(self, times: list[int], values: list[Any], seqs: list[int]) -> Iterator[StoredRow]:
        return zip(times, values, repeat(self.unit), repeat(""), repeat(self.gateway), repeat(self.boot), seqs,
                   repeat(self.tip_size))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(map(operator.eq, self, other))

    __hash__ = None  # type: ignore[assignment]  # mutable columns, like a list

    def __repr__(self) -> str:
        return (f"SeriesRows({len(self)} rows, unit={self.unit!r}, gateway={self.gateway!r}, boot={self.boot!r}, "
                f"tip_size={self.tip_size!r})")


def times_of(rows: Sequence[StoredRow]) -> list[int]:
    """The event times (µs) of ``rows``: a :class:`SeriesRows`' own column (not a copy: do not
    change it), else read off the tuples."""
    if isinstance(rows, SeriesRows):
        return rows.times
    return list(map(_TIME, rows))
