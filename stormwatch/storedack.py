"""Stored-acknowledgements: ingest tells a gateway which of its readings are durably stored (stdlib only).

The broker's PUBACK only says the broker has a message; a broker that crashes before writing its
persistence file (Mosquitto saves every ``autosave_interval`` seconds) forgets what it held for an
offline consumer. So a gateway keeps each reading in its outbox until *ingest* confirms that the
reading is in the store (:mod:`stormwatch.gateway.publisher`), and ingest publishes, after every
durable batch write, one QoS 1 message per gateway on ``stormwatch/v1/<site>/<gateway>/stored``
(:func:`stormwatch.topics.stored`)::

    {"stored": [{"boot": "9f1c2a", "seqs": [[0, 41], [43, 43]]}], "by": "stormwatch-ingest"}

The design: docs/contract.md ("The modules", `stormwatch/storedack.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

#: One confirmed run: ``(boot, first seq, last seq)``, inclusive.
Confirmed = tuple[str, int, int]


class StoredAckError(ValueError):
    """A stored-acknowledgement payload that does not follow the contract (the message says what)."""


def runs(seqs: Iterable[int]) -> list[list[int]]:
    """``seqs`` (any order, repeats allowed) as ascending inclusive ``[first, last]`` runs."""
    ordered = sorted(set(seqs))
    if ordered and ordered[-1] - ordered[0] == len(ordered) - 1:  # one run (a batch of a gateway, as a rule)
        return [[ordered[0], ordered[-1]]]
    out: list[list[int]] = []
    for seq in ordered:
        if out and seq == out[-1][1] + 1:
            out[-1][1] = seq
        else:
            out.append([seq, seq])
    return out


def encode(by: str, seqs: Mapping[str, Iterable[int]]) -> bytes:
    """The payload confirming ``seqs`` (boot → sequence numbers), written by ingest ``by``."""
    stored = [{"boot": boot, "seqs": runs(s)} for boot, s in sorted(seqs.items())]
    return json.dumps({"stored": stored, "by": by}, separators=(",", ":")).encode()


def _seq(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StoredAckError(f"{where}: a sequence number is a non-negative JSON integer, got {value!r}")
    return value


def decode(payload: bytes) -> list[Confirmed]:
    """The confirmed runs of a payload.

    Raises:
        StoredAckError: not UTF-8 JSON, or not the shape above (a run with first > last, a boot
            that is not a non-empty string...).
    """
    try:
        doc = json.loads(payload)
    except (UnicodeDecodeError, ValueError) as exc:
        raise StoredAckError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("stored"), list):
        raise StoredAckError('expected an object with a "stored" list')
    out: list[Confirmed] = []
    for i, entry in enumerate(doc["stored"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("boot"), str) or not entry["boot"]:
            raise StoredAckError(f"stored.{i}: expected an object with a non-empty string boot")
        seqs = entry.get("seqs")
        if not isinstance(seqs, list):
            raise StoredAckError(f"stored.{i}.seqs: expected a list of [first, last] runs")
        for j, run in enumerate(seqs):
            where = f"stored.{i}.seqs.{j}"
            if not isinstance(run, list) or len(run) != 2:
                raise StoredAckError(f"{where}: expected [first, last]")
            first, last = _seq(run[0], where), _seq(run[1], where)
            if first > last:
                raise StoredAckError(f"{where}: first {first} after last {last}")
            out.append((entry["boot"], first, last))
    return out
