"""The workers' schedule names real test modules (tests/scheduling.py): a renamed or moved module
would silently lose its place at the front of the slow lane."""

from __future__ import annotations

from tests.conftest import REPO
from tests.scheduling import LONGEST_FIRST


def test_the_longest_modules_exist_once_each() -> None:
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    missing = [m for m in LONGEST_FIRST if not (REPO / m).is_file()]
    assert missing == [], f"tests/scheduling.py names modules that are not there: {missing}"
