"""The InfluxDB placement of a write into windows where nothing is stored: the shortcut for readings
each alone in their device, quantity and microsecond (``influxwrite._place_free``) places them where the
slot search places them, and leaves every other write to the search (docs/influxdb-schema.md)."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

import stormwatch.stores.influxwrite as influxwrite
from stormwatch.stores.influxwrite import LineProtocolWrites, Placement

T0_NS = 1_780_000_000_000_000_000


class _Empty(LineProtocolWrites):
    """A store whose windows hold nothing (the placement's query answers no point)."""

    def _stored(self, *_args: Any) -> Any:
        return iter(())


def _write(rng: random.Random, n: int, crowded: bool) -> tuple[list[Any], list[int]]:
    readings, stamps = [], []
    for i in range(n):
        us = rng.randrange(3) if crowded else i * 1_000 + rng.randrange(1_000)
        device = rng.choice(("turb-up", "turb-down")) if crowded else f"dev-{i % 7}"
        unit = rng.choice(("NTU", "FNU")) if crowded else "NTU"
        seq = rng.randrange(4) if crowded else i
        readings.append(SimpleNamespace(site="s", device=device, quantity="turbidity", unit=unit, value=float(i),
                                        gateway=rng.choice(("gw", "gw2")), boot=rng.choice(("b1", "b2")), seq=seq,
                                        tip_size=None, raw=None, flags=[]))
        stamps.append(T0_NS + us * 1_000 + rng.randrange(1_000))
    return readings, stamps


def _shape(p: Placement) -> tuple[Any, ...]:
    return ([(id(r), page, slot, ns) for r, page, slot, ns in p.new], [id(r) for r in p.stored],
            [(id(r), ns, v, u) for r, ns, v, u in p.conflicts])


@pytest.mark.parametrize("seed", range(20))
def test_the_shortcut_places_as_the_slot_search(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    store = _Empty()
    taken = 0
    for crowded in (False, True):
        readings, stamps = _write(rng, rng.randrange(1, 60), crowded)
        shortcut = influxwrite._place_free(readings, stamps)
        placed = store._place(readings, stamps)
        with monkeypatch.context() as m:
            m.setattr(influxwrite, "_place_free", lambda *_: None)
            searched = store._place(readings, stamps)
        assert _shape(placed) == _shape(searched)
        if shortcut is not None:
            taken += 1
            assert _shape(shortcut) == _shape(searched)
    assert taken >= 1  # a write of readings each alone in its microsecond takes it


def test_readings_sharing_a_microsecond_are_left_to_the_slot_search() -> None:
    r = SimpleNamespace(site="s", device="d", quantity="turbidity", unit="NTU", value=1.0, gateway="gw", boot="b",
                        seq=1, tip_size=None, raw=None, flags=[])
    other_unit = SimpleNamespace(**{**vars(r), "unit": "FNU"})  # the same identity with another unit
    assert influxwrite._place_free([r, other_unit], [T0_NS, T0_NS + 1]) is None
    placed = _Empty()._place([r, other_unit], [T0_NS, T0_NS + 1])
    assert len(placed.new) == 1 and len(placed.conflicts) == 1


def _cover_plainly(spans: dict[str, list[tuple[int, str]]]) -> list[influxwrite.Window]:
    """The windows of ``cover("site", spans, "device")`` found one microsecond at a time."""
    out = []
    for site, items in spans.items():
        runs: list[list[tuple[int, str]]] = []
        for item in sorted(items):
            if runs and item[0] - runs[-1][-1][0] <= influxwrite._WINDOW_GAP_US:
                runs[-1].append(item)
            else:
                runs.append([item])
        out += [influxwrite.Window((("site", (site,)), ("device", tuple(sorted({d for _, d in run})))),
                                   run[0][0] * 1_000, run[-1][0] * 1_000 + 999) for run in runs]
    return out


@pytest.mark.parametrize("seed", range(30))
def test_the_windows_cover_every_run_of_microseconds(seed: int) -> None:
    rng = random.Random(seed)
    gap = influxwrite._WINDOW_GAP_US
    spans: dict[str, list[tuple[int, str]]] = {}
    for site in rng.sample(("s1", "s2", "s3"), rng.randrange(1, 4)):
        t, items = rng.randrange(10**15), []
        for _ in range(rng.randrange(1, 40)):  # steps within a run, at its edge, and past it
            t += rng.choice((0, rng.randrange(gap), rng.randrange(gap - 1, gap + 2), rng.randrange(gap, 4 * gap)))
            items.append((t, rng.choice(("d1", "d2", "d3"))))
        spans[site] = rng.sample(items, len(items))
    assert influxwrite.cover("site", spans, "device") == _cover_plainly(spans)
    one = {site: [items[0]] for site, items in spans.items()}
    assert influxwrite.cover("site", one, "device") == _cover_plainly(one)
