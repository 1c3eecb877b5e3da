"""Example site files shipped with stormwatch (``stormwatch.examples``).

``site.yaml`` is the site the demo runs and ``stormwatch gateway --check`` can validate; find it
with :func:`stormwatch.resources.example_site`.
"""
