"""``stormwatch evaluate`` over a record with hundreds of short rain-gauge gaps: the text summary
gives their count and total length on one short line; the list is in --json and under -v."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from stormwatch import resources
from stormwatch.app.cli import app
from stormwatch.contract import Reading
from stormwatch.stores.sqlite import SqliteStore
from tests.alerts_support import MIN, T0

GAPS = 200


def test_two_hundred_gaps_are_a_count_and_a_total(tmp_path: Path) -> None:
    # the example site's gauge, polled every 60 s, reports every 10 min: silent more than 120 s, so
    # each ten minutes between reports hold one gap
    site_file = resources.example_site()
    store = SqliteStore(tmp_path / "sw.db")
    store.write_readings([Reading(site="riverside-commons", device="rain-1", quantity="rain_tips", value=0,
                                  unit="{tip}", time=T0 + k * 10 * MIN, gateway="gw-riverside-1", boot="b1", seq=k,
                                  tip_size="0.01 in") for k in range(GAPS)])
    store.close()
    end = T0 + GAPS * 10 * MIN
    args = ["evaluate", "--site", str(site_file), "--store", f"sqlite:///{tmp_path / 'sw.db'}",
            "--from", T0.isoformat(), "--until", end.isoformat()]
    gaps = json.loads(CliRunner().invoke(app, [*args, "--json"], catch_exceptions=False).output)["data_gaps"]
    assert len(gaps) > 10
    text = CliRunner().invoke(app, args, catch_exceptions=False).output
    (summary,) = [line for line in text.splitlines() if "rain UNKNOWN" in line]
    assert f"in {len(gaps)} intervals" in summary and "(each listed: --json or -v)" in summary
    assert len(summary) < 400, summary
