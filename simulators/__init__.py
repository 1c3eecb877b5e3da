"""Simulated field devices that speak the real protocols (Modbus TCP/RTU, MaxBotix serial lines),
driven by a physical scenario on a simulated clock (:class:`stormwatch.clock.ScenarioClock`).

Modules:
    design_storm   NRCS Type II/III 24-hour cumulative distributions → tip times.
    tips           :class:`TipSeries`: sorted tip times, counters, trailing intensities.
    rain_record    :class:`RainRecord`: a real tip record (file loader) replayed as rain.
    basin          stage–storage volume, its inverse, and the initial sediment depth.
    ph             water chemistry of a pH probe: mixing washout water into runoff, the Nernst electrode.
    scenario       :class:`Scenario` (YAML) and :class:`SiteScenario` (values at an event time).
    pty            pseudo-terminal pairs with a stable symlink path.
    modbus_server  pymodbus 3.16 servers whose registers are computed at request time.
    serial_device  a MaxBotix HRXL writing ``R####\\r`` lines on a pty.
    site           :class:`SimulatedSite`: every device of a site config, in a background thread.
    cli            ``stormwatch simulate``.
"""
