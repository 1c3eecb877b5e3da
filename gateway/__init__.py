"""The stormwatch edge gateway.

Polls the devices of one site as their profiles say (:mod:`gateway.drivers`), turns counter
samples into tip deltas (:mod:`gateway.counter`), flags quality (:mod:`gateway.qc`), commits each
reading to a durable outbox (:mod:`gateway.outbox`) and publishes it to MQTT at QoS 1, deleting it
only after the broker's PUBACK (:mod:`gateway.publisher`). :class:`gateway.service.Gateway` wires
it together; :mod:`gateway.cli` adds ``stormwatch gateway`` and ``stormwatch decode``.

The site and profiles are validated once and compiled into a stdlib-only plan
(:mod:`gateway.plan`); the field process ``python -m gateway --plan`` runs it without importing
pydantic (:mod:`gateway.run`).
"""
