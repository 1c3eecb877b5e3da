"""Ordinance events as Grafana annotations, pushed through the Grafana HTTP API (grafana-client).

:class:`GrafanaAnnotations` posts one annotation per event to ``POST /api/annotations``:

* time: the event time (ms since the epoch); storm events with ``storm_start``/``storm_end``
  and data gaps with ``gap_start``/``gap_end`` become *regions* over that span;
* tags: ``stormwatch``, the site, the kind and the rule -- the dashboards' built-in annotation
  query shows tag ``stormwatch`` (dashboards/common.py);
* text: ``<title>: <message> [<citation>]``, title and text as in the ``events`` measurement
  (``stormwatch.stores.lineprotocol.event_point``), so both annotation sources read the same.

The design: docs/alerts.md ("The modules", `alerts/grafana.py`).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import datetime

import requests
from grafana_client import GrafanaApi
from grafana_client.client import GrafanaException

from stormwatch.contract import Event
from stormwatch.stores.lineprotocol import event_point

log = logging.getLogger(__name__)

#: Tag every pushed annotation carries.
TAG = "stormwatch"


def _ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def annotation_of(event: Event) -> dict[str, object]:
    """The ``/api/annotations`` fields of ``event``: ``time``, ``timeEnd`` (ms), ``tags``, ``text``."""
    fields = event_point(event).fields
    start, end = event.details.span() or (event.event_time, event.event_time)
    return {
        "time": _ms(start),
        "timeEnd": _ms(end),
        "tags": [TAG, event.site, event.kind, event.rule],
        "text": f"{fields['title']}: {fields['text']}",
    }


class GrafanaAnnotations:
    """Push events to Grafana as annotations.

    Args:
        url: Grafana base URL, e.g. ``http://grafana:3000``.
        token: API token (service account, Editor); sent as ``Authorization: Bearer``.
        timeout_s: per-request timeout (seconds).
        remember: how many pushed events to remember for skipping repeats.

    Raises:
        ValueError: empty URL or token.
    """

    def __init__(self, url: str, token: str, *, timeout_s: float = 5.0, remember: int = 10_000) -> None:
        if not url or not token:
            raise ValueError("a Grafana URL and an API token are required for annotations")
        self.url = url.rstrip("/")
        self._api = GrafanaApi.from_url(self.url, credential=token, timeout=timeout_s)
        self._remember = remember
        self._pushed: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        #: Annotations written / refused or not delivered since start.
        self.written = 0
        self.failed = 0

    def __repr__(self) -> str:
        return f"GrafanaAnnotations({self.url!r})"  # never the token

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GrafanaAnnotations | None:
        """A sink from ``STORMWATCH_GRAFANA_URL`` / ``STORMWATCH_GRAFANA_TOKEN``; ``None`` unless both are set."""
        url, token = env.get("STORMWATCH_GRAFANA_URL", ""), env.get("STORMWATCH_GRAFANA_TOKEN", "")
        if not url or not token:
            return None
        return cls(url, token)

    def write_event(self, event: Event) -> None:
        """:meth:`write_events` for one event (fits ``AlertService(on_event=...)``)."""
        self.write_events([event])

    def write_events(self, events: Sequence[Event]) -> int:
        """Post each event not pushed before; returns how many annotations Grafana accepted."""
        accepted = 0
        for event in events:
            key = (event.site, event.occurrence, event.kind)
            if key in self._pushed:
                continue
            body = annotation_of(event)
            try:
                self._api.annotations.add_annotation(
                    time_from=body["time"], time_to=body["timeEnd"], tags=body["tags"], text=body["text"])
            except (GrafanaException, requests.RequestException) as exc:
                self.failed += 1
                log.warning("Grafana %s did not take the annotation of %s %s at %s: %s", self.url, event.kind,
                            event.site, event.event_time.isoformat(), exc)
                continue
            self._pushed[key] = None
            while len(self._pushed) > self._remember:
                self._pushed.popitem(last=False)
            accepted += 1
        self.written += accepted
        return accepted
