"""Broker URLs and client credentials, shared by every MQTT client of stormwatch.

Broker URLs: ``mqtt://[user[:password]@]host[:port]`` or ``mqtts://...`` (TLS); ``tcp://`` and
``ssl://`` are accepted as aliases, and a bare ``host:port`` means ``mqtt://host:port``.

Credentials may also come from the environment: ``STORMWATCH_MQTT_USERNAME``,
``STORMWATCH_MQTT_PASSWORD`` (URL values win); ``STORMWATCH_MQTT_CA_FILE`` names a CA bundle for
``mqtts`` (default: the system trust store); ``STORMWATCH_MQTT_CERT_FILE`` and
``STORMWATCH_MQTT_KEY_FILE`` name a client certificate and its private key (PEM) for brokers that
require client certificates (``require_certificate true`` in Mosquitto). The TLS files may also be
given in the URL query -- ``mqtts://host:8883?ca_file=/etc/ca.pem&cert_file=c.pem&key_file=k.pem``
-- which wins over the environment. A client key without a certificate (or the reverse) is an
error. Passwords are never logged: use :meth:`BrokerSettings.safe_url` in messages.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

import paho.mqtt.client as mqtt

DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}
_ALIASES = {"tcp": "mqtt", "ssl": "mqtts"}
#: URL query keys → environment fallbacks for the TLS files.
_TLS_FILES = {
    "ca_file": "STORMWATCH_MQTT_CA_FILE",
    "cert_file": "STORMWATCH_MQTT_CERT_FILE",
    "key_file": "STORMWATCH_MQTT_KEY_FILE",
}


class BrokerUrlError(ValueError):
    """A broker URL that cannot be used (the message never contains the password)."""


@dataclass(frozen=True)
class BrokerSettings:
    """Where and how to connect. ``password`` is excluded from ``repr``."""

    host: str
    port: int
    tls: bool
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def safe_url(self) -> str:
        """The URL without the password (for logs)."""
        user = f"{self.username}@" if self.username else ""
        return f"{'mqtts' if self.tls else 'mqtt'}://{user}{self.host}:{self.port}"


def parse_broker_url(url: str, env: Mapping[str, str] | None = None) -> BrokerSettings:
    """Parse ``url`` (see the module docstring).

    Raises:
        BrokerUrlError: unknown scheme, missing host or a bad port.
    """
    env = os.environ if env is None else env
    text = url if "://" in url else f"mqtt://{url}"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise BrokerUrlError(f"bad broker URL: {exc}") from None
    scheme = _ALIASES.get(parts.scheme.lower(), parts.scheme.lower())
    if scheme not in DEFAULT_PORTS:
        raise BrokerUrlError(f"broker URL must start with mqtt:// or mqtts://, got scheme {parts.scheme!r}")
    if not parts.hostname:
        raise BrokerUrlError("broker URL has no host (expected mqtt://host:port)")
    username = unquote(parts.username) if parts.username else env.get("STORMWATCH_MQTT_USERNAME") or None
    password = unquote(parts.password) if parts.password else env.get("STORMWATCH_MQTT_PASSWORD") or None
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - set(_TLS_FILES))
    if unknown:
        raise BrokerUrlError(f"unknown broker URL option(s) {unknown} (known: {sorted(_TLS_FILES)})")
    files = {key: (query[key][-1] if key in query else env.get(var)) or None for key, var in _TLS_FILES.items()}
    if (files["cert_file"] is None) != (files["key_file"] is None):
        raise BrokerUrlError(
            "a client certificate needs both cert_file and key_file (STORMWATCH_MQTT_CERT_FILE/_KEY_FILE)"
        )
    if scheme != "mqtts" and any(files.values()) and any(k in query for k in _TLS_FILES):
        raise BrokerUrlError("TLS files given for a plain mqtt:// URL (use mqtts://)")
    return BrokerSettings(
        host=parts.hostname,
        port=port or DEFAULT_PORTS[scheme],
        tls=scheme == "mqtts",
        username=username,
        password=password,
        **files,
    )


def apply_credentials(client: mqtt.Client, broker: BrokerSettings) -> None:
    """Set username/password and TLS (``ca_file`` or the system trust store, and the client
    certificate/key when given) on a paho client.

    Raises:
        OSError / ssl.SSLError: a TLS file that cannot be read (paho loads them here).
    """
    if broker.username:
        client.username_pw_set(broker.username, broker.password)
    if broker.tls:
        client.tls_set(
            ca_certs=broker.ca_file, certfile=broker.cert_file, keyfile=broker.key_file, cert_reqs=ssl.CERT_REQUIRED
        )
