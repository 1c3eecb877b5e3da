"""Import logger files into the store, and replay them through the rules.

``stormwatch import FILE --site SITE.yaml --device ID`` reads a data file (Campbell Scientific
TOA5, Onset HOBOware CSV, rtl_433 JSON Lines or generic delimited text) into readings of one device
(running rain totals through the gateway's own counter function) and stores them
through the same validation, deduplication and sinks as live data. ``stormwatch replay FILE``
answers "what would this file have triggered?" on a temporary single-gauge site.

The design: docs/importing.md ("The modules", `importers/__init__.py`).
"""
