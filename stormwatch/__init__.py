"""stormwatch: stormwater compliance monitoring for construction sites.

This package holds what every part shares: the message contract (:mod:`stormwatch.contract`),
MQTT topics (:mod:`stormwatch.topics`), clocks (:mod:`stormwatch.clock`), exact rain units
(:mod:`stormwatch.rain`), device profiles (:mod:`stormwatch.profiles`), site configuration
(:mod:`stormwatch.config`) and the command line (:mod:`stormwatch.app.cli`).
"""

__version__ = "0.1.0"
