"""Simulated field devices that speak the real protocols (Modbus TCP/RTU, MaxBotix serial lines),
driven by a physical scenario on a simulated clock (:class:`stormwatch.clock.ScenarioClock`).

The design: docs/simulators.md ("The modules", `simulators/__init__.py`).
"""
