"""The inspector's desk: ``stormwatch web``, a server-rendered web application over the same store
and work-order state as the services, and the e-mail notifications of work orders.

* :mod:`stormwatch.web.accounts` -- users, roles, per-site authorization, argon2 password hashes,
  server-side sessions (``web.db`` in the state directory); ``stormwatch users``.
* :mod:`stormwatch.web.overview` -- what the pages show: each site's state now (gaps are unknown,
  never dry), a site's series over a window, in a constant number of store queries per page.
* :mod:`stormwatch.web.charts` -- server-side SVG charts (no internet, no JavaScript needed).
* :mod:`stormwatch.web.excerpts` -- the ordinance text a citation enforces (``web/ordinances/``).
* :mod:`stormwatch.web.photos`, :mod:`~stormwatch.web.forms` -- photo checks; form bodies per their charset.
* :mod:`stormwatch.web.app` -- the Starlette application: every route, once; :mod:`~stormwatch.web.desk`
  what it serves (``app.state.desk``); :mod:`~stormwatch.web.pages` the frame of every page (session,
  CSRF, errors); the handlers by area: ``login``, ``portfolio``, ``sites``, ``orders``, ``order_actions``.
* :mod:`stormwatch.web.notify` -- e-mail over SMTP when an order opens, is due soon, goes overdue.
* :mod:`stormwatch.web.cli` -- ``stormwatch web``, ``stormwatch users``, ``stormwatch notify``.
"""
