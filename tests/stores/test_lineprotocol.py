"""Line-protocol encoding (failure-kinds.md #12-#14). Expected lines are written out by hand from
the InfluxDB line-protocol rules (escape ``,`` ``=`` space in tags; quote strings; ``i`` ints)."""

from __future__ import annotations

from datetime import UTC, datetime

from stormwatch.contract import Event, Reading
from stormwatch.stores.base import DeadLetter
from stormwatch.stores.lineprotocol import (
    Float,
    Point,
    deadletter_points,
    encode_point,
    encode_points,
    escape_key,
    event_point,
    reading_line,
    reading_lines,
    reading_point,
    time_ns,
)

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
# 2026-06-01T12:00:00Z = 1780315200 s since the epoch (20605 days * 86400 + 12 h).
T0_NS = 1_780_315_200_000_000_000


def reading(**kw: object) -> Reading:
    base: dict[str, object] = dict(site="riverside", device="turb-down", quantity="turbidity", value=12.5,
                                   unit="NTU", time=T0, gateway="gw-1", boot="b1", seq=7, raw=[0, 16712])
    base.update(kw)
    return Reading.model_validate(base)


def test_time_ns_is_exact() -> None:
    assert time_ns(T0) == T0_NS
    assert time_ns(datetime(2026, 6, 1, 12, 0, 0, 1, tzinfo=UTC)) == T0_NS + 1_000


def test_tag_value_with_comma_space_equals_is_escaped_never_quoted() -> None:
    assert escape_key("Pond 3, Inlet=N") == "Pond\\ 3\\,\\ Inlet\\=N"
    line = encode_point(reading_point(reading(site="Pond 3, Inlet=N")))
    assert line is not None
    assert ",site=Pond\\ 3\\,\\ Inlet\\=N," in line
    assert '"Pond' not in line


def test_reading_line_schema() -> None:
    line = encode_point(reading_point(reading(flags=("spike", "out_of_range")), late=True))
    assert line == (
        "readings,device=turb-down,quantity=turbidity,site=riverside,unit=NTU "
        'value=12.5,gateway="gw-1",boot="b1",seq=7i,raw="[0,16712]",flags="spike,out_of_range",late=true '
        f"{T0_NS}"
    )


def test_integer_value_is_written_as_float_and_tips_as_integer() -> None:
    turb = encode_point(reading_point(reading(value=13)))
    assert turb is not None and " value=13.0," in turb and "13i" not in turb
    tips = encode_point(reading_point(reading(device="rain-1", quantity="rain_tips", value=3, unit="{tip}")))
    assert tips is not None
    assert " value=3.0,tips=3i," in tips
    assert tips.endswith(',flags="" ' + tips.rsplit(" ", 1)[1])  # always present: "" when clean
    assert "late=" not in tips  # only when true


def test_string_fields_escape_quotes_and_backslashes() -> None:
    line = encode_point(Point("m", {"k": "v"}, {"s": 'say "hi" \\o/'}, 1))
    assert line == 'm,k=v s="say \\"hi\\" \\\\o/" 1'


def test_nan_and_inf_fields_are_dropped_one_by_one() -> None:
    # failure-kinds.md #13: {turbidity: NaN, stage: 1.2} writes only stage.
    line = encode_point(Point("m", {"site": "a"}, {"turbidity": float("nan"), "stage": 1.2}, 5))
    assert line == "m,site=a stage=1.2 5"
    assert encode_point(Point("m", {"site": "a"}, {"x": float("inf"), "y": float("-inf"), "z": Float("nan")}, 5)) \
        is None
    lines = encode_points([
        Point("m", {}, {"x": float("nan")}, 1),
        Point("m", {}, {"x": 2.0}, 2),
    ])
    assert lines == ["m x=2.0 2"]


def test_measurement_and_field_key_escaping_and_empty_tags() -> None:
    line = encode_point(Point("my meas,x", {"a b": "", "c": "d"}, {"f=1": 1, "ok": True}, 3))
    assert line == "my\\ meas\\,x,c=d f\\=1=1i,ok=true 3"


def test_event_point_has_annotation_fields() -> None:
    ev = Event(kind="storm_qualified", site="riverside", event_time=T0, rule="R1", citation="Ch. 133 §133-7A(2)",
               occurrence="storm-2026-06-01T10:00Z", work_order="WO-1", due_at=datetime(2026, 6, 2, 17, tzinfo=UTC),
               message="0.52 in of rain", tips=52, depth_in=0.52)
    p = event_point(ev)
    assert p.tags == {"site": "riverside", "kind": "storm_qualified", "rule": "R1"}
    assert p.fields["title"] == "storm_qualified (R1)"
    assert p.fields["text"] == "0.52 in of rain [Ch. 133 §133-7A(2)]"
    assert p.fields["due_at"] == "2026-06-02T17:00:00Z"
    line = encode_point(p)
    assert line is not None and "tips=52i" in line and "depth_in=0.52" in line and line.endswith(str(T0_NS))


def test_deadletters_at_the_same_instant_do_not_overwrite_each_other() -> None:
    letters = [DeadLetter("schema", f"d{i}", "t", b"\xff", T0) for i in range(3)]
    points = deadletter_points(letters)
    assert [p.time_ns for p in points] == [T0_NS, T0_NS + 1, T0_NS + 2]
    assert points[0].fields["payload"] == "/w=="  # base64 of 0xFF
    assert points[0].fields["payload_encoding"] == "base64"


def test_reading_line_fast_path_equals_the_point_encoder() -> None:
    # The hot path must produce exactly the documented schema line for every shape of reading.
    cases = [
        (reading(), False),
        (reading(value=13), False),
        (reading(site="Pond 3, Inlet=N", device="rain=1,", unit="{tip}"), False),
        (reading(device="rain-1", quantity="rain_tips", value=3, unit="{tip}", raw=1420), False),
        (reading(flags=("spike", "stuck")), True),
        (reading(raw='say "hi" \\ ok', boot='b "2"'), True),
    ]
    for r, late in cases:
        assert reading_line(r, late=late) == encode_point(reading_point(r, late=late))
    assert reading_line(reading(value=13)) == (
        'readings,device=turb-down,quantity=turbidity,site=riverside,unit=NTU '
        f'value=13.0,gateway="gw-1",boot="b1",seq=7i,raw="[0,16712]",flags="" {T0_NS}')


def test_a_writes_lines_in_one_loop_equal_each_readings_line() -> None:
    # reading_lines keeps the last boot's quoted fields: readings of boots and gateways taking turns,
    # one sharing a text with another's boot, each get their own
    mixed = [reading(gateway=g, boot=b, seq=i) for i, (g, b) in enumerate(
        [("gw-1", "b1"), ("gw-1", "b1"), ("gw-1", "b2"), ("gw-2", "b2"), ("b2", "gw-2"), ("gw-1", "b1")])]
    placed = [(r, i % 2, i, time_ns(r.time)) for i, r in enumerate(mixed)]
    for late in (False, True):
        assert reading_lines(placed, late=late) == [
            encode_point(reading_point(r, late=late, slot=slot, page=page)) for r, page, slot, _ in placed]
