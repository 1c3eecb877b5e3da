"""The service runtime: what the services and commands share that is not the contract.

A layer of its own (``.importlinter``), above the stores and below the services (ingest, gateway
and up); it imports only the contract, never a service:

* :mod:`stormwatch.runtime.cliutil` -- the command-line layer every ``stormwatch`` command shares
  (one-line errors, the option vocabulary, logging options, site-file loading);
* :mod:`stormwatch.runtime.logs` -- logging set-up (the lean gateway process calls it too);
* :mod:`stormwatch.runtime.mqtt` -- broker URLs, credentials and TLS for every MQTT client;
* :mod:`stormwatch.runtime.mqttsession` -- the one MQTT session factory
  (:class:`~stormwatch.runtime.mqttsession.SessionClient`);
* :mod:`stormwatch.runtime.mqtttakeover` -- telling a session taken over from a lost connection;
* :mod:`stormwatch.runtime.sitedir` -- sites as a directory of site files, kept current;
* :mod:`stormwatch.runtime.partition` -- which sites a process owns when several share a county.

Nothing is imported here: the lean gateway process loads only the modules it uses.
"""
