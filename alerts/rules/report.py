"""R1r: the inspection report to the SMO within two business days of the inspection (Ch. 196 §196-9B).

No readings drive it: the work-order book applies it when an inspection order is completed (it
opens an ``inspection_report`` order due ``within_business_days`` business days after the
inspection date, :mod:`stormwatch.alerts.workorders`). The module also declares the events of the
work-order book itself: ``inspection_overdue`` (an order's deadline passed, announced once by the
alert service) and ``report_due``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from stormwatch.alerts.rules.params import RuleParams
from stormwatch.alerts.rules.registry import EventKindSpec, RuleKind


class ReportRule(RuleParams):
    """R1r: inspection report to the SMO within N business days of the inspection (§196-9B).

    Attributes:
        within_business_days: business days after the inspection date (weekends and public
            holidays excluded).
        holidays: ``<country>-<subdivision>`` for python-holidays, e.g. ``US-NY``.
    """

    kind: Literal["report"]
    within_business_days: int = Field(default=2, ge=1)
    holidays: str = "US-NY"


KIND = RuleKind(
    kind="report", params=ReportRule, build=None,
    summary="R1r: inspection report within N business days of the inspection (§196-9B), applied by the work-order book",
    events=(EventKindSpec("report_due", summary="an inspection report is due to the SMO by due_at"),),
)

#: Events of the work-order book (not of a rule fed readings).
EVENTS = (EventKindSpec("inspection_overdue", summary="a work order passed its deadline without being completed"),)
