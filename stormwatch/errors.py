"""The one base class of errors in what a user gave us (no dependencies: the lean gateway imports it).

Every error whose message names the file or option and says what is wrong with it -- a site file,
a profile, a rule pack, a store or broker URL, an import option, a work-order change -- derives
from :class:`InputError`. The command line (:mod:`stormwatch.runtime.cliutil`) turns any of them that
reaches it into one line ``error: <message>`` and exit status 2, whichever command raised it, so a
new command gets that behaviour without its own ``try``.
"""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """Bad user input; the message names the file or option and what is wrong (one line per problem)."""


def read_text(path: str | Path, error: type[InputError] = InputError, *, encoding: str = "utf-8",
              what: str = "file") -> str:
    """The text of a file the user named, or one clear error naming it.

    Args:
        path: the file.
        error: the :class:`InputError` subclass to raise (the caller's, e.g. ``ConfigError``).
        encoding: ``utf-8`` (``utf-8-sig`` also drops a byte-order mark).
        what: what the file should be, for the message (``site file``, ``rain file`` ...).

    Raises:
        InputError: (``error``) missing, a directory, unreadable, or not text (binary data or not
            UTF-8); the message starts with the path.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise error(f"{p}: no such {what}") from None
    except IsADirectoryError:
        raise error(f"{p}: is a directory, not a {what}") from None
    except OSError as exc:
        raise error(f"{p}: cannot read: {exc.strerror or exc}") from None
    nul = data.find(b"\x00")
    if nul >= 0:
        raise error(f"{p}: not a text {what}: binary data (NUL byte at offset {nul})") from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise error(f"{p}: not a text {what} in UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}") from None


def load_yaml(path: str | Path, error: type[InputError] = InputError, *, what: str = "YAML file") -> object:
    """The YAML document of a file the user named (:func:`read_text`, then one-line YAML errors).

    A key written twice in one mapping is an error (:func:`_unique_keys`): PyYAML keeps the last
    value silently, so ``site:`` with ``id:`` twice would name a site nobody meant.

    Raises:
        InputError: (``error``) as :func:`read_text`, or not valid YAML: ``<path>:<line>:<column>: <problem>``
            (a repeated key: ``<path>:<line>:<column>: not valid YAML: key 'id' given twice, at lines 2 and 3 ...``).
    """
    import yaml  # here, not at the top: the lean gateway imports this module and never parses YAML

    text = read_text(path, error, what=what)
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:  # libyaml: a directory of thousands of site files loads ~10x faster
        try:
            return yaml.load(text, Loader=_unique_keys(fast))
        except yaml.YAMLError:
            pass  # the pure-Python parser below says what is wrong (the same documents fail in both)
    try:
        return yaml.load(text, Loader=_unique_keys(yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise error(f"{path}{where}: not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None


def _unique_keys(base: type) -> type:
    """A subclass of the PyYAML loader ``base`` (``SafeLoader`` or libyaml's ``CSafeLoader``: the
    constructor is Python in both) that refuses a mapping with a key written twice.

    YAML 1.2 (section 3.2.1.1) requires mapping keys to be unique; PyYAML keeps the last value
    without a word. Merge keys (``<<: *defaults``) are not duplicates: a key given beside a merge
    overrides the merged one, as YAML's merge type says.

    Raises (when loading):
        yaml.constructor.ConstructorError: the key, the line of both, marked at the second.
    """
    import yaml

    class UniqueKeyLoader(base):  # type: ignore[misc]
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
            if isinstance(node, yaml.MappingNode):
                seen: dict[object, yaml.Node] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        first = seen.get(key)
                    except TypeError:
                        continue  # an unhashable key: the base constructor says what is wrong
                    if first is not None:
                        raise yaml.constructor.ConstructorError(
                            None, None,
                            f"key {key!r} given twice, at lines {first.start_mark.line + 1} and "
                            f"{key_node.start_mark.line + 1} (YAML would keep only the last; remove one)",
                            key_node.start_mark)
                    seen[key] = key_node
            result: dict[object, object] = super().construct_mapping(node, deep=deep)
            return result

    return UniqueKeyLoader


def problems_message(source: str, problems: list[str]) -> str:
    """One line for every problem found in ``source`` (a file, an option): ``source: first; second;
    ...`` -- one error message, one line, whatever the count (the command line prints it as
    ``error: ...``).

    Each problem is one line already (``key.path: what is wrong (entity, line N)``); line breaks in
    one are folded to spaces.
    """
    return f"{source}: " + "; ".join(" ".join(p.split()) for p in problems if p.strip())


def yaml_line(path: str | Path, loc: tuple[str | int, ...]) -> int | None:
    """The 1-based line of the YAML file ``path`` where the value at key path ``loc`` is written
    (``("devices", 0, "poll_interval_s")``), or of the deepest part of it that exists; ``None``
    when the file cannot be read or composed. Used only to name where an error is (never on the
    happy path: it re-reads the file)."""
    import yaml

    try:
        node = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)),
                         None)
            if match is None:
                continue  # a union tag pydantic adds to the path ("modbus-rtu"), not a key of the file
            line = match[0].start_mark.line + 1
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line
