"""Host names and addresses a user writes (a Modbus TCP device's ``host``, a broker URL's host).

A host is an IP address (IPv4 dotted quad or IPv6, :mod:`ipaddress`) or a host name of the
grammar of RFC 1123 section 2.1 (RFC 952 relaxed): dot-separated labels of letters, digits and
hyphens, each 1-63 characters, neither starting nor ending with a hyphen, 253 characters in all,
with one trailing dot allowed (a fully qualified name). One leniency: ``_`` inside a label, which
DNS itself allows (RFC 2181 section 11) and which Docker Compose container names
(``stormwatch_mqtt_1``) resolve with. What fails this -- ``"not a host!!"``, ``"bad host"`` -- can
never be resolved, so it is an error at start, not a connection retried forever.
"""

from __future__ import annotations

import ipaddress
import re

_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?")
#: The longest host name (RFC 1123 2.1: 255 octets on the wire, 253 characters written out).
MAX_HOST_NAME = 253


def host_problem(host: str) -> str | None:
    """Why ``host`` is neither an IP address nor a host name (one phrase), or ``None`` when it is one.

    IPv6 is given without brackets here (the URL parser removes them).
    """
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    if not name:
        return "an empty host name"
    if len(name) > MAX_HOST_NAME:
        return f"a host name of {len(name)} characters (at most {MAX_HOST_NAME}, RFC 1123)"
    for label in name.split("."):
        if not _LABEL.fullmatch(label):
            bad = next((c for c in label if not (c.isascii() and (c.isalnum() or c in "-_"))), None)
            if bad is not None:
                return (f"{bad!r} is not allowed in a host name (letters, digits, '-' and '.'; RFC 1123) "
                        "nor is it an IP address")
            if not label:
                return "an empty label ('..' or a leading '.') in a host name"
            if len(label) > 63:
                return f"a host name label of {len(label)} characters (at most 63, RFC 1123)"
            return f"label {label!r} starts or ends with '-' (RFC 1123)"
    if re.fullmatch(r"[0-9.]+", name):
        return "not an IPv4 address (four numbers 0-255) nor a host name"
    return None
