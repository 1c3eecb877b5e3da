"""The stormwatch edge gateway.

Polls the devices of one site as their profiles say (:mod:`stormwatch.gateway.drivers`), turns counter
samples into tip deltas (:mod:`stormwatch.gateway.counter`), flags quality (:mod:`stormwatch.gateway.qc`), commits each
reading to a durable outbox (:mod:`stormwatch.gateway.outbox`) and publishes it to MQTT at QoS 1, deleting it
only after the broker's PUBACK (:mod:`stormwatch.gateway.publisher`). :class:`stormwatch.gateway.service.Gateway` wires
it together; :mod:`stormwatch.gateway.cli` adds ``stormwatch gateway`` and ``stormwatch decode``.

The site and profiles are validated once and compiled into a stdlib-only plan
(:mod:`stormwatch.gateway.plan`); the field process ``python -m stormwatch.gateway --plan`` runs it without importing
pydantic (:mod:`stormwatch.gateway.run`).
"""
