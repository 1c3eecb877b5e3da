"""``stormwatch profiles list``, ``stormwatch packs list`` and ``stormwatch example-site``.

What this installation can use, and where each file comes from: the built-ins shipped in the
package, or a user directory (``stormwatch --profiles DIR`` / ``--packs DIR``, or
``STORMWATCH_PROFILES`` / ``STORMWATCH_PACKS``) searched before them.
"""

from __future__ import annotations

from collections.abc import Callable

import typer

from stormwatch import resources
from stormwatch.cliutil import fail
from stormwatch.errors import InputError
from stormwatch.resources import Found


def _print(found: list[Found], what: str, load: Callable[[str], object]) -> None:
    """One line per file: name, origin (built-in or user), path, what it replaces -- and, for a file
    that cannot be used (``load`` raises), ``BROKEN: <why>`` (the file is named by the path already)."""
    if not found:
        fail(f"no {what} found")
    width = max(len(f.name) for f in found)
    for f in found:
        hidden = f"  (replaces {', '.join(str(p) for p in f.shadows)})" if f.shadows else ""
        try:
            load(f.name)
        except InputError as exc:
            why = str(exc).splitlines()[0]
            hidden += f"  BROKEN: {why.removeprefix(f'{f.path}: ')}"
        typer.echo(f"{f.name:<{width}}  {f.origin:<8}  {f.path}{hidden}")


def register(app: typer.Typer) -> None:
    """Add the ``profiles``, ``packs`` and ``example-site`` commands to ``app``."""
    profiles = typer.Typer(help="Device profiles: one YAML file per sensor model.", no_args_is_help=True)
    packs = typer.Typer(help="Jurisdiction rule packs: the thresholds and citations of each code.",
                        no_args_is_help=True)

    @profiles.command("list")
    def profiles_list() -> None:
        """List every device profile by model name, built-in or user, with its file; a file that
        cannot be used says BROKEN and why."""
        from stormwatch.profiles import ProfileLibrary

        library = ProfileLibrary()
        _print(library.sources(), "device profiles", library.get)

    @packs.command("list")
    def packs_list() -> None:
        """List every rule pack by name (a site's ``jurisdiction``), built-in or user, with its file;
        a pack that cannot load (its name differs from its file, bad YAML ...) says BROKEN and why."""
        from stormwatch.alerts.packs import load_pack, pack_sources

        _print(pack_sources(), "rule packs", load_pack)

    @app.command("example-site")
    def example_site() -> None:
        """Print the example site file (the demo's site, commented) to start your own:
        `stormwatch example-site > site.yaml`."""
        typer.echo(resources.example_site().read_text(encoding="utf-8"), nl=False)

    app.add_typer(profiles, name="profiles")
    app.add_typer(packs, name="packs")
