"""The web desk's field-readings form (issue 16): an inspector of the site records a transparency tube's
cm, a grab sample's NTU and pH on the site page (CSRF, role-checked); they are stored as manual
readings with the inspector's name at the sampling time, shown on the page, and refused with a
message (nothing stored) when out of range. Others may not post."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from stormwatch.contract import MANUAL_GATEWAY, manual_inspector
from stormwatch.stores.urls import open_store
from tests.web_support import A, B, build, client, login


def manual(world: dict[str, object]) -> list[tuple[str, str, float, str, datetime, str | None]]:
    store = open_store(str(world["store"]))
    try:
        rows = store.query_readings(A) + store.query_readings(B)
    finally:
        store.close()
    return [(r.device, r.quantity, r.value, r.unit, r.time, manual_inspector(r)) for r in rows
            if r.gateway == MANUAL_GATEWAY]


def test_an_inspector_records_field_readings_on_the_site_page(tmp_path: Path) -> None:
    world = build(tmp_path)
    c = client(world)
    token = login(c, "ina")
    page = c.get(f"/sites/{A}").text
    assert 'action="/sites/riverside-commons/readings"' in page and "Record as Ina Inspector" in page
    # 11:30 EDT = 15:30 UTC, half an hour before the desk's clock
    form = {"csrf_token": token, "point": "turbidity_pair", "sampled_at": "2026-06-02T11:30", "transparency": "28",
            "turbidity": "41.5", "ph": "7.9"}
    r = c.post(f"/sites/{A}/readings", data=form)
    assert r.status_code == 303 and r.headers["location"] == f"/sites/{A}?done=reading"
    at = datetime(2026, 6, 2, 15, 30, tzinfo=UTC)
    assert sorted(manual(world)) == [("turbidity_pair", "ph", 7.9, "[pH]", at, "Ina Inspector"),
                                     ("turbidity_pair", "transparency", 28.0, "cm", at, "Ina Inspector"),
                                     ("turbidity_pair", "turbidity", 41.5, "NTU", at, "Ina Inspector")]
    shown = c.get(f"/sites/{A}?done=reading").text
    assert "Recorded." in shown and "turbidity 41.5 NTU" in shown and "Ina Inspector" in shown
    # the same sample again is recorded once
    assert c.post(f"/sites/{A}/readings", data=form).status_code == 303
    assert len(manual(world)) == 3
    # the same sample with another turbidity: refused and said, the recorded 41.5 kept (failure kind #27)
    r = c.post(f"/sites/{A}/readings", data={**form, "turbidity": "50"})
    assert r.status_code == 409
    assert ("Not recorded (conflicting_value): turbidity 50 NTU: this sample is already recorded as 41.5 NTU, "
            "which is kept") in r.text
    assert sorted(manual(world))[2][2] == 41.5 and len(manual(world)) == 3


def test_refused_entries_say_why_and_store_nothing(tmp_path: Path) -> None:
    world = build(tmp_path)
    c = client(world)
    token = login(c, "ina")
    r = c.post(f"/sites/{A}/readings", data={"csrf_token": token, "point": "turbidity_pair",
                                             "sampled_at": "2026-06-02T11:30", "ph": "15"})
    assert r.status_code == 400
    assert "Not recorded: ph 15: outside 0 to 14 [pH] (grab sample, hand pH meter)" in r.text
    assert 'value="15"' in r.text  # the form keeps what was typed
    r = c.post(f"/sites/{A}/readings", data={"csrf_token": token, "point": "turbidity_pair",
                                             "sampled_at": "2026-06-02T11:30"})
    assert r.status_code == 400 and "nothing to record" in r.text
    r = c.post(f"/sites/{A}/readings", data={"csrf_token": token, "point": "turbidity_pair",
                                             "sampled_at": "2026-06-02T11:30", "turbidity": "1e6"})
    assert r.status_code == 400  # a number for people: 1000000, never 1e+06
    assert "Not recorded: turbidity 1000000: outside 0 to 4000 NTU" in r.text and "1e+06" not in r.text
    assert manual(world) == []


def test_samples_are_taken_only_at_the_sites_discharge_points(tmp_path: Path) -> None:
    """The "Where" list offers the site's one discharge point (its turbidity_pair), never a device;
    a pH posted against the rain gauge (or a probe) is refused with the site's points, nothing stored."""
    import re

    world = build(tmp_path)
    c = client(world)
    token = login(c, "ina")
    page = c.get(f"/sites/{A}").text
    select = page[page.index('name="point"'):]
    select = select[:select.index("</select>")]
    assert re.findall(r'<option value="([^"]*)"', select) == ["", "turbidity_pair"] or \
        re.findall(r'<option value="([^"]*)"', select) == ["turbidity_pair"]
    for device in ("rain-1", "turb-down", "basin-level"):
        r = c.post(f"/sites/{A}/readings", data={"csrf_token": token, "point": device,
                                                 "sampled_at": "2026-06-02T11:30", "ph": "7"})
        assert r.status_code == 400, device
        assert (f"Not recorded: &#39;{device}&#39; is a device of site &#39;riverside-commons&#39;, not a discharge "
                "point: samples are taken where stormwater leaves the site (its points: turbidity_pair)") in r.text
    assert manual(world) == []


def test_only_the_sites_inspectors_may_post_and_only_with_the_token(tmp_path: Path) -> None:
    world = build(tmp_path)
    data = {"point": "turbidity_pair", "sampled_at": "2026-06-02T11:30", "ph": "7.0"}
    ina = client(world)
    token = login(ina, "ina")
    assert ina.post(f"/sites/{A}/readings", data={"csrf_token": "forged", **data}).status_code == 403
    assert ina.post(f"/sites/{B}/readings", data={"csrf_token": token, **data}).status_code == 403  # not her site
    for user in ("carl", "sam"):  # a contractor, the SMO: they read, inspectors record
        other = client(world)
        other_token = login(other, user)
        assert other.post(f"/sites/{A}/readings", data={"csrf_token": other_token, **data}).status_code == 403
        assert "Record as" not in other.get(f"/sites/{A}").text
    assert manual(world) == []


def test_a_sampling_time_the_clocks_skip_or_repeat_is_refused_with_the_way_out(tmp_path: Path) -> None:
    """The form's ``sampled_at`` is read like ``--sampled-at`` (stormwatch.display.local_instant): 02:30 on
    8 March 2026 does not exist in New York (02:00 EST -> 03:00 EDT); 01:30 on 1 November happens twice."""
    world = build(tmp_path)
    c = client(world)
    token = login(c, "ina")
    base = {"csrf_token": token, "point": "turbidity_pair", "turbidity": "12"}
    r = c.post(f"/sites/{A}/readings", data={**base, "sampled_at": "2026-03-08T02:30"})
    assert r.status_code == 400
    assert ("Not recorded: sampled at &#39;2026-03-08T02:30&#39; does not exist in America/New_York: the clocks "
            "jump ahead over it that night (EST to EDT)") in r.text
    r = c.post(f"/sites/{A}/readings", data={**base, "sampled_at": "2026-11-01T01:30"})
    assert r.status_code == 400
    assert "happens twice in America/New_York" in r.text and "2026-11-01T01:30:00-04:00 (EDT, the first)" in r.text
    assert manual(world) == []
