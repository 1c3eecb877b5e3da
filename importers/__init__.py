"""Import logger files into the store, and replay them through the rules.

``stormwatch import FILE --site SITE.yaml --device ID`` reads a data file (Campbell Scientific
TOA5, Onset HOBOware CSV, rtl_433 JSON Lines or generic delimited text) into readings of one device
(running rain totals through the gateway's own counter function) and stores them
through the same validation, deduplication and sinks as live data. ``stormwatch replay FILE``
answers "what would this file have triggered?" on a temporary single-gauge site.

Modules (one job each):

* :mod:`stormwatch.importers.cells` -- one cell: gaps (empty, ``NaN``, sentinels), exact numbers, units.
* :mod:`stormwatch.importers.table` -- a parsed file: header, units, data lines with line numbers, times.
* :mod:`stormwatch.importers.toa5`, :mod:`stormwatch.importers.hobo`, :mod:`stormwatch.importers.rtl433`,
  :mod:`stormwatch.importers.generic` -- the four readers.
* :mod:`stormwatch.importers.detect` -- which reader a file needs.
* :mod:`stormwatch.importers.options` -- the format options (``--value-column``, ``--tip-mm``...).
* :mod:`stormwatch.importers.identity` -- the identity of imported readings (idempotent re-import).
* :mod:`stormwatch.importers.rows` -- file rows to :class:`~stormwatch.contract.Reading` objects.
* :mod:`stormwatch.importers.overlap` -- what the gateway's stored readings of a device already cover.
* :mod:`stormwatch.importers.load` -- validation and store writes; the summary.
* :mod:`stormwatch.importers.replay` -- the temporary site and the rule engine run.
* :mod:`stormwatch.importers.cli` -- the two commands.

See ``docs/importing.md``.
"""
