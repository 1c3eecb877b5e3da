"""A typed InfluxQL query for grafana-foundation-sdk, which has no InfluxDB query type.

Grafana's InfluxDB data source (query language InfluxQL) stores a raw query target as::

    {"refId": "A", "datasource": {"type": "influxdb", "uid": ...}, "query": "SELECT ...",
     "rawQuery": true, "resultFormat": "time_series" | "table", "alias": ...}

:class:`InfluxQLQuery` implements the SDK's ``Dataquery`` interface (a model with ``to_json``) and
:class:`InfluxQL` is its builder, so panels take it like any SDK query (``.with_target(...)``).
:class:`InfluxAnnotationTarget` is the annotation form (``target.query`` plus the columns that give
an annotation's title, text and tags); it subclasses the SDK's ``AnnotationTarget`` so
``AnnotationQuery.target`` accepts it.

The queries use Grafana's InfluxQL macros ``$timeFilter``, ``$__interval``, ``$__interval_ms`` and
dashboard variables (``$site``, ...); ``tests/dashboards/test_queries.py`` expands them and runs
every query against a real InfluxDB 1.x.
"""

from __future__ import annotations

from typing import Literal, Self

from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import dashboard

#: The provisioned InfluxDB (InfluxQL) data source (deploy/grafana/provisioning/datasources).
DATASOURCE = dashboard.DataSourceRef(type_val="influxdb", uid="stormwatch-influxql")

ResultFormat = Literal["time_series", "table"]


class InfluxQLQuery(cogvariants.Dataquery):
    """One raw InfluxQL query target.

    Attributes:
        ref_id: the panel-unique query id (``A``, ``B``, ...).
        query: the InfluxQL text, with Grafana macros and ``$variables``.
        result_format: ``time_series`` (a frame per series) or ``table``.
        alias: series alias pattern (``$tag_device``, ...); ``None`` keeps InfluxDB's names.
        datasource: the data source reference.
        hide: hide this query's result (helper queries).
    """

    def __init__(self, ref_id: str = "A", query: str = "", result_format: ResultFormat = "time_series",
                 alias: str | None = None, datasource: dashboard.DataSourceRef | None = None,
                 hide: bool | None = None) -> None:
        self.ref_id = ref_id
        self.query = query
        self.result_format: ResultFormat = result_format
        self.alias = alias
        self.datasource = datasource if datasource is not None else DATASOURCE
        self.hide = hide

    def to_json(self) -> dict[str, object]:
        """The Grafana JSON of this target."""
        payload: dict[str, object] = {
            "refId": self.ref_id,
            "datasource": self.datasource,
            "query": self.query,
            "rawQuery": True,
            "resultFormat": self.result_format,
        }
        if self.alias is not None:
            payload["alias"] = self.alias
        if self.hide is not None:
            payload["hide"] = self.hide
        return payload


class InfluxQL(cogbuilder.Builder[cogvariants.Dataquery]):
    """Builder of :class:`InfluxQLQuery`: ``InfluxQL("SELECT ...").ref_id("B").table()``."""

    def __init__(self, query: str) -> None:
        self._internal = InfluxQLQuery(query=query)

    def build(self) -> InfluxQLQuery:
        return self._internal

    def ref_id(self, ref_id: str) -> Self:
        self._internal.ref_id = ref_id
        return self

    def table(self) -> Self:
        """Return the result as a table (one row per point and series)."""
        self._internal.result_format = "table"
        return self

    def alias(self, alias: str) -> Self:
        self._internal.alias = alias
        return self

    def datasource(self, datasource: dashboard.DataSourceRef) -> Self:
        self._internal.datasource = datasource
        return self


class InfluxAnnotationTarget(dashboard.AnnotationTarget):
    """An InfluxQL annotation query: each returned point is an annotation.

    Attributes:
        query: InfluxQL with ``$timeFilter``.
        title_column, text_column, tags_column: the fields/tags giving title, text and tags.
    """

    def __init__(self, query: str, title_column: str = "title", text_column: str = "text",
                 tags_column: str = "kind") -> None:
        super().__init__()
        self.query = query
        self.title_column = title_column
        self.text_column = text_column
        self.tags_column = tags_column

    def to_json(self) -> dict[str, object]:
        return {
            "query": self.query,
            "rawQuery": True,
            "fromAnnotations": True,
            "titleColumn": self.title_column,
            "textColumn": self.text_column,
            "tagsColumn": self.tags_column,
        }


class InfluxAnnotation(cogbuilder.Builder[dashboard.AnnotationTarget]):
    """Builder of :class:`InfluxAnnotationTarget` for ``AnnotationQuery().target(...)``."""

    def __init__(self, query: str) -> None:
        self._internal = InfluxAnnotationTarget(query)

    def build(self) -> InfluxAnnotationTarget:
        return self._internal
