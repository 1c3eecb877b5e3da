"""The inspector's desk: ``stormwatch web``, a server-rendered web application over the same store
and work-order state as the services, and the e-mail notifications of work orders.

The design: docs/web.md ("The modules", `web/__init__.py`).
"""
