"""The SMO's enforcement desk: from the sensor evidence to a notice an SMO can serve.

Nothing is issued by the product: the SMO decides; the desk drafts, computes, reminds and records.

* :mod:`stormwatch.enforcement.clocks` -- counting a code's days (calendar, business, holidays).
* :mod:`stormwatch.enforcement.ladder` -- offense number in the look-back window, fines, continuing violations.
* :mod:`stormwatch.enforcement.actions` -- what may be recorded on a case, and when it is refused.
* :mod:`stormwatch.enforcement.cases` -- the cases and their history (``enforcement.db``).
* :mod:`stormwatch.enforcement.deadlines`, :mod:`stormwatch.enforcement.view` -- where a case stands on a day.
* :mod:`stormwatch.enforcement.letters` -- the notice of violation and the stop-work order (HTML, PDF).
* :mod:`stormwatch.enforcement.register` -- the MS4 permit's enforcement register and annual summary.
* :mod:`stormwatch.enforcement.cli` -- ``stormwatch enforce``.

What each code prescribes is the ``enforcement:`` section of its rule pack
(:mod:`stormwatch.alerts.enforcement_pack`). Workflow, clocks and citations: docs/enforcement.md.
"""
