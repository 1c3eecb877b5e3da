"""Which tip size a site file gives a rain gauge at each event time (docs/ingest.md, "Tip sizes and rain rates").

Every stored rain reading carries the size of its tips (:attr:`stormwatch.contract.Reading.tip_size`).
A site file names a size too: its device's profile (``counter.resolution``) for the gauge in service
now, and the ``replaced_gauges`` of the device (:class:`stormwatch.config.ReplacedGauge`) for the
earlier ones, each until the instant it was replaced. :class:`TipSizes` answers "which size at time
``t``"; a stored reading whose size is another is :class:`TipSizeMismatch` -- the site file and the
data disagree, and no answer computed from either would be right (``stormwatch evaluate`` stops with
the message, naming both sizes; ingest dead-letters such a reading as ``tip_size_mismatch``).

A reading without a size (stored by an earlier stormwatch, or sent by a gateway not yet upgraded)
is read with the size the site file gives for its time; whoever does so logs it
(:meth:`TipSizes.assumed`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from stormwatch.config import SiteConfig
from stormwatch.errors import InputError
from stormwatch.profiles import ProfileLibrary
from stormwatch.rain import TipResolution, tip_size_of
from stormwatch.wire import format_time


class TipSizeMismatch(InputError):
    """Stored rain of one tip size where the site file names another for that time.

    Attributes:
        device: the gauge.
        stored: the readings' size (canonical text).
        expected: the site file's size at that time (canonical text).
        at: the event time of the first such reading.
    """

    def __init__(self, message: str, device: str, stored: str, expected: str, at: datetime) -> None:
        super().__init__(message)
        self.device = device
        self.stored = stored
        self.expected = expected
        self.at = at


@dataclass(frozen=True)
class TipSizes:
    """The tip sizes a site file gives one tip-counting device over time.

    Attributes:
        device: device id.
        profile: its profile's model (the gauge in service now).
        current: the profile's counter resolution.
        earlier: ``(until, size)`` of each replaced gauge, oldest first (``until`` strictly increasing).
    """

    device: str
    profile: str
    current: TipResolution
    earlier: tuple[tuple[datetime, TipResolution], ...] = ()

    @classmethod
    def of(cls, cfg: SiteConfig, profiles: ProfileLibrary, device: str) -> TipSizes | None:
        """The sizes of ``device`` of ``cfg``, or ``None`` when its profile counts no tips.

        Raises:
            KeyError: no such device.
            stormwatch.profiles.ProfileError: its profile cannot be loaded.
        """
        dev = cfg.device(device)
        counter = profiles.get(dev.profile).counter
        if counter is None:
            return None
        return cls(device, dev.profile, counter.tip_resolution,
                   tuple((g.until, tip_size_of(g.tip_size)) for g in dev.replaced_gauges))

    @classmethod
    def single(cls, device: str, size: TipResolution, profile: str = "") -> TipSizes:
        """One size at every time (a gauge never replaced)."""
        return cls(device, profile, size)

    @property
    def replaced(self) -> bool:
        """Whether the site file records a replacement."""
        return bool(self.earlier)

    @cached_property
    def _untils(self) -> list[datetime]:
        return [until for until, _ in self.earlier]

    def at(self, t: datetime) -> TipResolution:
        """The size of the gauge in service at event time ``t`` (a gauge replaced at ``until`` counted
        the readings before that instant; the readings at or after it are the next gauge's)."""
        if not self.earlier:
            return self.current
        i = bisect.bisect_right(self._untils, t)
        return self.earlier[i][1] if i < len(self.earlier) else self.current

    def text_at(self, t: datetime) -> str:
        """Canonical text of :meth:`at` (what a reading's ``tip_size`` holds)."""
        return str(self.at(t))

    def source_at(self, t: datetime) -> str:
        """Where the site file says so, for messages (``"profile tipping_bucket_modbus_counter"``, or
        ``"replaced_gauges.0 (until 2026-06-10T18:00:00Z)"``)."""
        if self.earlier:
            i = bisect.bisect_right(self._untils, t)
            if i < len(self.earlier):
                return f"devices[{self.device}].replaced_gauges.{i} (until {format_time(self.earlier[i][0])})"
        since = f", in service since {format_time(self.earlier[-1][0])}" if self.earlier else ""
        return f"its profile {self.profile}{since}" if self.profile else "the gauge's size"

    def check(self, stored: str | None, t: datetime) -> TipResolution:
        """The size of a stored reading at ``t``: its own when the site file agrees, the site file's
        when the reading names none.

        Raises:
            TipSizeMismatch: the reading names another size than the site file gives for ``t``.
        """
        expected = self.at(t)
        if stored is None or stored == "":
            return expected
        size = tip_size_of(stored)
        if size != expected:
            raise self.mismatch(str(size), t)
        return size

    def mismatch(self, stored: str, t: datetime) -> TipSizeMismatch:
        """The error of a reading of size ``stored`` at ``t`` (the message names both sizes and the fix)."""
        expected = self.text_at(t)
        message = (f"rain gauge {self.device}: the stored readings from {format_time(t)} have tips of {stored}, "
                   f"but the site file gives the gauge {expected} then ({self.source_at(t)}); stored rain keeps the "
                   f"size it was counted with. If the gauge was replaced, record the earlier gauge under the "
                   f"device's replaced_gauges (tip_size: {stored}, until: when it was replaced); otherwise give "
                   f"the device the profile of the gauge that counted them (docs/deployment.md, \"Replacing a rain "
                   f"gauge\")")
        return TipSizeMismatch(message, self.device, stored, expected, t)

    def assumed(self, count: int, first: datetime, last: datetime) -> str:
        """The warning for ``count`` readings without a size read with the site file's (what was assumed)."""
        a, b = self.text_at(first), self.text_at(last)
        sizes = a if a == b else f"{a} .. {b}"
        return (f"rain gauge {self.device}: {count} stored reading(s) from {format_time(first)} to {format_time(last)} "
                f"carry no tip size (written by an earlier stormwatch, or a gateway not yet upgraded): read as "
                f"{sizes}, the size the site file gives for their time ({self.source_at(last)})")
