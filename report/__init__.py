"""The site log book: compliance documents an SMO can file (``stormwatch report``) and the
five-year record of a site (``stormwatch archive`` / ``stormwatch import-archive``).

* :mod:`stormwatch.report.build` gathers a report from the store and the work-order state: it
  re-runs the site's rules over the period (:func:`stormwatch.alerts.backfill.evaluate`, the rules'
  own code, with a :class:`~stormwatch.alerts.rules.RuleTrace` collecting what they decided on),
  counts each sensor's readings and matches storms, events and work orders.
* :mod:`stormwatch.report.render` writes it as HTML (Jinja2), PDF (WeasyPrint renders that same
  HTML) or CSV (the same numbers, one row per item); :mod:`stormwatch.report.charts` draws the
  charts with matplotlib (SVG).
* :mod:`stormwatch.report.archive` writes and loads the portable bundle of a site's records.
"""
