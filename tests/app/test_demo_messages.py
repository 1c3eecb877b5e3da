"""The demo's own lines agree with their counts (``1 warning ... is in``, ``1 tip``)."""

from __future__ import annotations

from pathlib import Path

from stormwatch.app.demo import warnings_note


def test_the_demo_says_where_one_warning_is(tmp_path: Path) -> None:
    log = tmp_path / "demo.log"
    assert warnings_note(1, log) == (f"1 warning of the services (gateway polls, ingest, alerts; wall-clock times) "
                                     f"is in {log}")
    many = warnings_note(2, log)
    assert many.startswith("2 warnings of the services") and many.endswith(f"are in {log}")
