"""The composition: what puts the services together, above all of them.

* :mod:`stormwatch.app.cli`       -- the ``stormwatch`` command (every service's command wired in).
* :mod:`stormwatch.app.demo`      -- ``stormwatch demo``; :mod:`stormwatch.app.workdir` its working directory.
* :mod:`stormwatch.app.pipeline`  -- simulated site + gateway + broker + ingest + alerts in one process.
* :mod:`stormwatch.app.broker`    -- the embedded MQTT broker (amqtt) of the demo.
* :mod:`stormwatch.app.servers`   -- Mosquitto and InfluxDB 1.x processes for tests and the demo.
* :mod:`stormwatch.app.catalog`   -- ``stormwatch profiles|packs list``.

Nothing below imports from here (``.importlinter``, checked by ``tests/codebase/test_layers.py``).
"""
