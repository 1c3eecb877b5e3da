"""Built-in device profiles (``stormwatch.device_profiles``): one YAML file per sensor model.

A data package: :class:`stormwatch.profiles.ProfileLibrary` finds these files with
:mod:`importlib.resources`, after any directory the user names (``--profiles`` /
``STORMWATCH_PROFILES``). See ``docs/profiles.md``.
"""
