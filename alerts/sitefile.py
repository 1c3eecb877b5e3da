"""A site file checked against its jurisdiction's rule pack, as every command of the alert engine and
the layers above loads one.

The check itself (:func:`stormwatch.alerts.packs.check_site_pack`) is also what the composition root
hands the services below the alert engine (gateway, ingest), which never import the rule packs
(:func:`stormwatch.runtime.cliutil.provide_site_checks`; ``.importlinter``): a site file is refused
by every command for the same reasons, with the same words.
"""

from __future__ import annotations

from pathlib import Path

from stormwatch.alerts.packs import check_site_pack
from stormwatch.config import SiteConfig
from stormwatch.profiles import ProfileLibrary
from stormwatch.runtime import cliutil


def load_site_file(path: Path, profiles: ProfileLibrary | None = None) -> SiteConfig:
    """The site file at ``path`` validated: the file, its devices' profiles and roles
    (:func:`stormwatch.config.load_site`), and its ``jurisdiction``, ``options`` and rule overrides
    against the rule pack (errors name the site file; docs/rules.md).

    Raises:
        stormwatch.config.ConfigError: an invalid site file.
        stormwatch.alerts.packs.PackError: an unknown pack, option or choice, or an override naming an
            unknown rule or parameter.
    """
    return cliutil.load_site_file(path, profiles, (check_site_pack,))
