"""The event schemas of ``docs/asyncapi.yaml``, generated from the rule registry.

The channels, messages and reading schema of the AsyncAPI document are written by hand; the
``Event`` schemas (the common fields, and one schema per details model with the kinds that carry
it) are generated here from :func:`stormwatch.alerts.rules.registry.rule_kinds` and written between
the markers :data:`BEGIN` and :data:`END`. A new rule module's events appear after::

    python -m stormwatch.alerts.asyncapi --write      # rewrite docs/asyncapi.yaml
    python -m stormwatch.alerts.asyncapi --check      # exit 1 when the committed file is stale

``tests/alerts/test_rule_registry.py`` fails when the committed document is stale (like the dashboards' JSON).
"""

from __future__ import annotations

import sys
import types
from datetime import datetime
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import yaml

from stormwatch.alerts.rules.registry import Registry, rule_kinds
from stormwatch.contract import Event, EventDetails

BEGIN = "    # BEGIN generated from the rule registry (python -m stormwatch.alerts.asyncapi --write)\n"
END = "    # END generated\n"

#: Descriptions of the common event fields.
_COMMON = {
    "kind": "The event kind; its details are the fields of the kind's schema below (one rule module each).",
    "site": "Site id.",
    "event_time": "When the condition became true (event time, RFC 3339 UTC).",
    "rule": "The pack's rule id (R1 storm, R1w routine, R2 turbidity, R3 basin, ...).",
    "citation": 'The ordinance section enforced, e.g. "Ch. 133 §133-7A(2)".',
    "occurrence": "Stable key of the occurrence (dedupes events and work orders).",
    "work_order": "Id of the work order this event opened or refers to.",
    "due_at": "Deadline where the law sets one (RFC 3339 UTC).",
    "message": "One human sentence for the timeline.",
    "late_detection_s": "Set when the event was found late: seconds after event_time + lateness.",
    "evidence": "The readings (or window medians) that triggered it. A turbidity window: window_start, window_end, "
                "upstream_median_ntu, downstream_median_ntu, allowed_ntu, unit, status, criterion (the R2 criterion "
                "judged by, e.g. washington), reason (why a window was not judged; only then), upstream, downstream.",
}


def _type_schema(tp: Any) -> dict[str, Any]:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(tp) if a is not type(None)]
        if len(options) == 1:
            return _type_schema(options[0])
        return {"oneOf": [_type_schema(a) for a in options]}
    if origin is list:
        (item,) = get_args(tp) or (Any,)
        return {"type": "array", "items": _type_schema(item) if item is not Any else {}}
    if origin is dict:
        return {"type": "object"}
    if tp is datetime or getattr(tp, "__name__", "") in ("AwareDatetime", "NaiveDatetime"):
        return {"type": "string", "format": "date-time"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    metadata = getattr(tp, "__metadata__", None)
    if metadata is not None:  # Annotated[...]
        return _type_schema(get_args(tp)[0])
    return {}


def _field_schemas(model: type[Any], skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        schema = _type_schema(info.annotation)
        for meta in info.metadata:
            ge = getattr(meta, "ge", None)
            if ge is not None and schema.get("type") in ("integer", "number"):
                schema["minimum"] = ge
        if name in _COMMON:
            schema["description"] = _COMMON[name]
        out[name] = schema
    return out


def _first_line(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def event_schemas(registry: Registry) -> dict[str, Any]:
    """``components.schemas`` entries for events: ``Event`` (one of the kinds' schemas),
    ``EventCommon`` and one ``<Details>Event`` per details model."""
    by_details: dict[type[EventDetails], list[str]] = {}
    for spec in sorted(registry.events.values(), key=lambda s: s.kind):
        by_details.setdefault(spec.details, []).append(spec.kind)
    common_fields = _field_schemas(Event, frozenset({"details"}))
    required = [n for n, f in Event.model_fields.items() if f.is_required()]
    schemas: dict[str, Any] = {
        "Event": {
            "description": "An ordinance event (Event.to_wire): the common fields and, flat beside them, the "
                           "details of its kind. Kinds and details are declared by the rule modules "
                           "(alerts/rules/, stormwatch.alerts.rules.registry).",
            "oneOf": [{"$ref": f"#/components/schemas/{d.__name__}Event"}
                      for d in sorted(by_details, key=lambda d: d.__name__)],
        },
        "EventCommon": {"type": "object", "required": required, "properties": common_fields},
    }
    for details in sorted(by_details, key=lambda d: d.__name__):
        props: dict[str, Any] = {"kind": {"type": "string", "enum": by_details[details]}}
        props.update(_field_schemas(details))
        part: dict[str, Any] = {"type": "object", "properties": props}
        summary = _first_line(details.__doc__)
        schemas[f"{details.__name__}Event"] = {
            "description": summary,
            "allOf": [{"$ref": "#/components/schemas/EventCommon"}, part],
        }
        kinds = [registry.events[k] for k in by_details[details]]
        part["description"] = "; ".join(f"{k.kind}: {k.summary}" + (f" (opens a {k.opens} work order)"
                                                                     if k.opens else "") for k in kinds)
    return schemas


def render(registry: Registry | None = None) -> str:
    """The generated block (markers included), indented under ``components.schemas``."""
    body = yaml.safe_dump(event_schemas(registry or rule_kinds()), sort_keys=False, allow_unicode=True, width=110)
    return BEGIN + "".join(f"    {line}\n" if line else "\n" for line in body.splitlines()) + END


def updated(text: str, registry: Registry | None = None) -> str:
    """``text`` (the AsyncAPI document) with its generated block replaced.

    Raises:
        ValueError: the markers are missing.
    """
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError("docs/asyncapi.yaml: the generated-block markers are missing")
    return text[:start] + render(registry) + text[end + len(END):]


def document_path() -> Path:
    """``docs/asyncapi.yaml`` of the source checkout."""
    return Path(__file__).resolve().parent.parent / "docs" / "asyncapi.yaml"


def main(argv: list[str]) -> int:
    """``--write`` rewrites the document; ``--check`` (default) exits 1 when it is stale."""
    path = document_path()
    text = path.read_text(encoding="utf-8")
    fresh = updated(text)
    if "--write" in argv:
        path.write_text(fresh, encoding="utf-8")
        print(f"wrote {path}")
        return 0
    if fresh != text:
        print(f"{path} is stale: run python -m stormwatch.alerts.asyncapi --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
