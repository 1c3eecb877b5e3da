"""Washington CSWGP end to end through Mosquitto: an inspector's field samples published with
``stormwatch readings add --broker`` reach the alert service, which opens the week's sampling reminder
of a discharge point, completes it with that point's sample, and opens the benchmark's corrective
actions for a sample above 25 NTU.

By hand (docs/reference/permits/wa-cswgp.md; site in America/Los_Angeles, PDT = UTC-7, discharging
every week: ``options.discharge: always``): the week of Sun 31 May 2026 runs 07:00 UTC 31 May to
07:00 UTC 7 June.

1. Wed 3 June 09:00 PDT (16:00 UTC): outfall-2, 10 NTU -- the site's first reading: outfall-1 has no
   sample this week, so its reminder opens (due 7 June 07:00 UTC); outfall-2's week is sampled.
2. 10:00 PDT (17:00 UTC): outfall-1, 40 NTU -- completes outfall-1's reminder at 17:00 UTC; 40 > 25 NTU
   is above the benchmark (S4.C.5.a): SWPPP review due by the end of 10 June (11 June 07:00 UTC), BMPs
   by the end of 13 June (14 June 07:00 UTC).
3. 11:00 PDT: outfall-2, 50 cm transparency -- moves event time past step 2 (lateness 120 s).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from stormwatch.alerts.workorders import ENGINE, WorkOrders
from stormwatch.app.cli import app
from stormwatch.clock import ManualClock
from stormwatch.config import parse_site
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import live_service, wa_doc
from tests.waits import wait_until

INSPECTOR = "M. Tanaka"


def add(site: Path, broker: str, point: str, hour: str, *values: str) -> None:
    result = CliRunner().invoke(app, ["readings", "add", "--site", str(site), "--by", INSPECTOR, "--point", point,
                                      "--sampled-at", f"2026-06-03T{hour}", *values, "--broker", broker],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output


def test_manual_samples_over_mqtt_open_and_close_work_orders(mosquitto_server: Any, tmp_path: Path) -> None:
    doc = wa_doc(options={"discharge": "always"})
    # a site id of its own: the session broker keeps the persistent sessions of other tests' services, and
    # theirs would queue this test's readings (and this service's, theirs) under a shared site id
    doc["site"] = {**doc["site"], "id": "wa-cswgp-live"}
    site = tmp_path / "wa-site.yaml"
    site.write_text(yaml.safe_dump(doc), encoding="utf-8")
    cfg = parse_site(doc, str(site), ProfileLibrary())
    clock = ManualClock(datetime(2026, 6, 3, 18, tzinfo=UTC))
    with live_service(cfg, mosquitto_server.url, tmp_path, clock, "wa-cswgp-live-alerts") as (_svc, seen, _store):
        add(site, mosquitto_server.url, "outfall-2", "09:00", "--turbidity-ntu", "10")
        add(site, mosquitto_server.url, "outfall-1", "10:00", "--turbidity-ntu", "40")
        add(site, mosquitto_server.url, "outfall-2", "11:00", "--transparency-cm", "50")
        wait_until(lambda: len([e for e in seen if e.kind == "benchmark_action_due"]) == 2, timeout_s=20,
                   what="the benchmark's two corrective actions")
        wait_until(lambda: any(e.kind == "sampling_done" and e.details.discharge_point == "outfall-1"  # type: ignore[attr-defined]
                               for e in seen), timeout_s=20, what="outfall-1's sample completing its reminder")
    book = WorkOrders(tmp_path / "state.db", clock)
    try:
        orders = {(o.rule, o.occurrence): o for o in book.list()}
        reminder = orders[("S1", "S1:outfall-1:week:2026-05-31")]
        assert (reminder.kind, reminder.due_at) == ("sampling", datetime(2026, 6, 7, 7, tzinfo=UTC))
        assert (reminder.status, reminder.completed_at, reminder.inspector) == (
            "completed", datetime(2026, 6, 3, 17, tzinfo=UTC), ENGINE)
        assert f"turbidity 40 NTU at Wed 03 Jun 2026 10:00 PDT (sampled by {INSPECTOR})" in (reminder.notes or "")
        assert ("S1", "S1:outfall-2:week:2026-05-31") not in orders  # sampled before any reminder was due
        actions = sorted((o.kind, o.occurrence, o.due_at, o.status) for o in book.list() if o.rule == "B1")
        assert actions == [
            ("benchmark_response", "B1:outfall-1:bmps:2026-06-03", datetime(2026, 6, 14, 7, tzinfo=UTC), "open"),
            ("benchmark_response", "B1:outfall-1:swppp_review:2026-06-03", datetime(2026, 6, 11, 7, tzinfo=UTC),
             "open")]
    finally:
        book.close()
    done = [e for e in seen if e.kind == "sampling_done" and e.details.discharge_point == "outfall-1"]  # type: ignore[attr-defined]
    assert done[0].work_order == reminder.id
