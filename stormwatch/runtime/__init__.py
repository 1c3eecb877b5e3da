"""The service runtime: what the services and commands share that is not the contract.

A layer of its own (``.importlinter``), above the stores and below the services (ingest, gateway
and up); it imports only the contract, never a service.

The design: docs/runtime.md ("The modules", `stormwatch/runtime/__init__.py`).
"""
