"""``stormwatch profiles list``, ``stormwatch packs list`` and ``stormwatch example-site``.

What this installation can use, and where each file comes from: the built-ins shipped in the
package, or a user directory (``stormwatch --profiles DIR`` / ``--packs DIR``, or
``STORMWATCH_PROFILES`` / ``STORMWATCH_PACKS``) searched before them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

from stormwatch import resources
from stormwatch.errors import InputError
from stormwatch.resources import Found
from stormwatch.runtime.cliutil import fail


def _not_one(path: Path, key: str) -> str | None:
    """Why ``path`` is not a file of this kind at all -- binary data, not a YAML mapping, a mapping
    without ``key`` (``model`` of a profile, ``rules`` of a pack; a site file is named as one) --
    or ``None`` when it looks like one (then what fails to load is a broken one)."""
    import yaml

    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    if b"\x00" in data:
        return "binary data"
    try:
        doc = yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError):
        return None  # text that does not parse: a broken file of this kind, most likely (a typo)
    if not isinstance(doc, dict):
        return f"a YAML {type(doc).__name__ if doc is not None else 'empty document'}, not a mapping"
    if key in doc:
        return None
    if "site" in doc and "devices" in doc:
        return "a site file (site:, devices:)"
    return f"a mapping without '{key}:'"


def _print(found: list[Found], what: str, key: str, load: Callable[[str], object]) -> None:
    """One line per file: name, origin (built-in or user), path, what it replaces -- and, for a file
    that is not one of ``what`` (a site file, binary data among the profiles), ``NOT A DEVICE PROFILE:
    <why>``,
    for one that cannot be used (``load`` raises), ``BROKEN: <why>`` (the file is named by the path
    already). Anything BROKEN -- or not one of them but hiding a built-in of its name -- ends the
    command with one error line and exit 2 (a CI check of a profile directory fails)."""
    if not found:
        fail(f"no {what} found")
    width = max(len(f.name) for f in found)
    broken = 0
    for f in found:
        hidden = f"  (replaces {', '.join(str(p) for p in f.shadows)})" if f.shadows else ""
        try:
            load(f.name)
        except InputError as exc:
            why = " ".join(str(exc).split())
            other = _not_one(f.path, key)
            if other is not None and not f.shadows:
                hidden += f"  NOT A {what.upper()[:-1]}: {other} (ignored; move it out of {f.path.parent})"
            else:
                broken += 1
                hidden += f"  BROKEN: {why.removeprefix(f'{f.path}: ')}"
        typer.echo(f"{f.name:<{width}}  {f.origin:<8}  {f.path}{hidden}")
    if broken:
        fail(f"{broken} of the {len(found)} {what} cannot be used (BROKEN above)")


def register(app: typer.Typer) -> None:
    """Add the ``profiles``, ``packs`` and ``example-site`` commands to ``app``."""
    profiles = typer.Typer(help="Device profiles: one YAML file per sensor model.", no_args_is_help=True)
    packs = typer.Typer(help="Jurisdiction rule packs: the thresholds and citations of each code.",
                        no_args_is_help=True)

    @profiles.command("list")
    def profiles_list() -> None:
        """List every device profile by model name, built-in or user, with its file; a file that
        cannot be used says BROKEN and why (then the exit status is 2), one that is no profile at all
        (a site file, binary data) says NOT A DEVICE PROFILE."""
        from stormwatch.profiles import ProfileLibrary

        library = ProfileLibrary()
        _print(library.sources(), "device profiles", "model", library.get)

    @packs.command("list")
    def packs_list() -> None:
        """List every rule pack by name (a site's ``jurisdiction``), built-in or user, with its file;
        a pack that cannot load (its name differs from its file, bad YAML ...) says BROKEN and why
        (then the exit status is 2), a file that is no pack at all (a site file) says NOT A RULE PACK."""
        from stormwatch.alerts.packs import load_pack, pack_sources

        _print(pack_sources(), "rule packs", "rules", load_pack)

    @app.command("example-site")
    def example_site() -> None:
        """Print the example site file (the demo's site, commented) to start your own:
        `stormwatch example-site > site.yaml`."""
        typer.echo(resources.example_site().read_text(encoding="utf-8"), nl=False)

    app.add_typer(profiles, name="profiles")
    app.add_typer(packs, name="packs")
