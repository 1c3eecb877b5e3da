"""Broker URLs and client credentials, shared by every MQTT client of stormwatch.

Broker URLs: ``mqtt://[user[:password]@]host[:port]`` or ``mqtts://...`` (TLS); ``tcp://`` and
``ssl://`` are accepted as aliases, and a bare ``host:port`` means ``mqtt://host:port``; query options:
the TLS files, ``protocol=5`` (MQTT 5 instead of 3.1.1) and ``max_packet_size=BYTES`` (the
broker's packet limit, when it does not announce it). The nodes of
a broker cluster are listed with commas, ``mqtt://node1:1883,node2:1883,node3:1883``: a client
connects to the first and, when a connection is lost or refused, tries the next
(:class:`stormwatch.runtime.mqttsession.SessionClient`; docs/scaling.md).

The design: docs/runtime.md ("The modules", `stormwatch/runtime/mqtt.py`).
"""

from __future__ import annotations

import logging
import os
import ssl
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

import paho.mqtt.client as mqtt

from stormwatch.errors import InputError
from stormwatch.hosts import host_problem

DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}
_ALIASES = {"tcp": "mqtt", "ssl": "mqtts"}
#: URL query keys → environment fallbacks for the TLS files.
_TLS_FILES = {
    "ca_file": "STORMWATCH_MQTT_CA_FILE",
    "cert_file": "STORMWATCH_MQTT_CERT_FILE",
    "key_file": "STORMWATCH_MQTT_KEY_FILE",
}


class BrokerUrlError(InputError):
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
    #: The other nodes of a broker cluster, ``(host, port)`` each, tried in turn after ``host``.
    others: tuple[tuple[str, int], ...] = ()
    #: MQTT protocol version: 4 (3.1.1) or 5 (the broker then announces its packet limit in CONNACK).
    protocol: int = 4
    #: The broker's packet limit in bytes, configured (``None``: only what the broker announces).
    max_packet_size: int | None = None

    @property
    def endpoints(self) -> tuple[tuple[str, int], ...]:
        """Every node to try, ``(host, port)``, the first one first."""
        return ((self.host, self.port), *self.others)

    def safe_url(self) -> str:
        """The URL without the password (for logs)."""
        user = f"{self.username}@" if self.username else ""
        hosts = ",".join(f"{h}:{p}" for h, p in self.endpoints)
        return f"{'mqtts' if self.tls else 'mqtt'}://{user}{hosts}"


def parse_broker_url(url: str, env: Mapping[str, str] | None = None) -> BrokerSettings:
    """Parse ``url`` (see the module docstring).

    Raises:
        BrokerUrlError: unknown scheme, a missing host or one that is neither an IP address nor an
            RFC 1123 host name, a bad port, or a path.
    """
    env = os.environ if env is None else env
    text = url if "://" in url else f"mqtt://{url}"
    text, others_text = _first_node(text)
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise BrokerUrlError(f"bad broker URL: {exc}") from None
    _check_port(port, "")
    scheme = _ALIASES.get(parts.scheme.lower(), parts.scheme.lower())
    if scheme not in DEFAULT_PORTS:
        raise BrokerUrlError(f"broker URL must start with mqtt:// or mqtts://, got scheme {parts.scheme!r}")
    if not parts.hostname:
        raise BrokerUrlError("broker URL has no host (expected mqtt://host:port)")
    _check_host(parts.hostname, "")
    if parts.path not in ("", "/"):  # MQTT over TCP has no path: ignoring one would hide a wrong URL
        raise BrokerUrlError(f"broker URL has a path {parts.path!r}: an MQTT broker is host:port only "
                             "(expected mqtt://host:port, options after ?)")
    others = tuple(_node(node, DEFAULT_PORTS[scheme]) for node in others_text)
    username = unquote(parts.username) if parts.username else env.get("STORMWATCH_MQTT_USERNAME") or None
    password = unquote(parts.password) if parts.password else env.get("STORMWATCH_MQTT_PASSWORD") or None
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - set(_TLS_FILES) - set(_OPTIONS))
    if unknown:
        raise BrokerUrlError(f"unknown broker URL option(s) {', '.join(unknown)} "
                             f"(known: {', '.join(sorted([*_TLS_FILES, *_OPTIONS]))})")
    protocol, max_packet = _protocol_options(query)
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
        others=others,
        protocol=protocol,
        max_packet_size=max_packet,
    )


_OPTIONS = ("protocol", "max_packet_size")
#: The smallest packet limit that still carries a reading message (MQTT 5 section 3.1.2.11.4 allows less).
MIN_PACKET_SIZE = 256


def _protocol_options(query: Mapping[str, list[str]]) -> tuple[int, int | None]:
    """``protocol`` and ``max_packet_size`` of a URL query.

    Raises:
        BrokerUrlError: a protocol other than 3.1.1/4 or 5, a packet limit that is not an integer of at
            least :data:`MIN_PACKET_SIZE` bytes.
    """
    protocol = 4
    if "protocol" in query:
        text = query["protocol"][-1].strip()
        if text not in ("5", "5.0", "4", "3.1.1"):
            raise BrokerUrlError(f"broker URL option protocol={text}: expected 5 (MQTT 5) or 3.1.1")
        protocol = 5 if text.startswith("5") else 4
    max_packet: int | None = None
    if "max_packet_size" in query:
        text = query["max_packet_size"][-1].strip()
        if not text.isdigit() or int(text) < MIN_PACKET_SIZE:
            raise BrokerUrlError(f"broker URL option max_packet_size={text}: expected a whole number of bytes, "
                                 f"at least {MIN_PACKET_SIZE}")
        max_packet = int(text)
    return protocol, max_packet


def _check_port(port: int | None, where: str) -> None:
    """A port the URL names must be a TCP port: ``:0`` is refused, never replaced by the default.

    Raises:
        BrokerUrlError: port 0.
    """
    if port is not None and not 1 <= port <= 65535:
        raise BrokerUrlError(f"bad broker URL{where}: port {port} is not a TCP port (1-65535)")


def _check_host(host: str, where: str) -> None:
    """A host the URL names must be an IP address or an RFC 1123 host name (:mod:`stormwatch.hosts`):
    ``mqtt://bad host`` can never be resolved, so it is refused at start, not retried forever.

    Raises:
        BrokerUrlError: any other text.
    """
    problem = host_problem(host)
    if problem is not None:
        raise BrokerUrlError(f"bad broker URL{where}: host {host!r} is not a host: {problem}")


def _first_node(url: str) -> tuple[str, list[str]]:
    """``url`` with only the first of its comma-separated nodes, and the other nodes' ``host[:port]``."""
    scheme, _, rest = url.partition("://")
    netloc, sep, tail = rest.partition("/") if "/" in rest.split("?", 1)[0] else rest.partition("?")
    user, at, hosts = netloc.rpartition("@")
    first, *others = hosts.split(",")
    return f"{scheme}://{user}{at}{first}{sep}{tail}", others


def _node(text: str, default_port: int) -> tuple[str, int]:
    """``(host, port)`` of one further cluster node ``host[:port]``.

    Raises:
        BrokerUrlError: an empty node, or a bad port.
    """
    try:
        parts = urlsplit(f"//{text.strip()}")
        port = parts.port
    except ValueError as exc:
        raise BrokerUrlError(f"bad broker URL node {text!r}: {exc}") from None
    _check_port(port, f" node {text!r}")
    if not parts.hostname or parts.username is not None or parts.path or parts.query:
        raise BrokerUrlError(f"bad broker URL node {text!r}: expected host or host:port after a comma")
    _check_host(parts.hostname, f" node {text!r}")
    return parts.hostname, port or default_port


def stop_network_loop(client: mqtt.Client) -> None:
    """End ``client``'s network thread (what paho's ``loop_stop`` does) and wait for it, without the race
    in paho 2.2's own: the thread clears its reference as it ends, and one that ended between
    ``loop_stop``'s check and its join made it raise ``AttributeError`` (a stopping ingest died so
    after a DISCONNECT; https://github.com/eclipse-paho/paho.mqtt.python/issues/872). The thread is
    read once here."""
    thread: threading.Thread | None = client._thread
    if thread is None:
        return
    client._thread_terminate = True
    if thread is threading.current_thread():
        return
    # A stop from another thread can come while the service's own thread is inside loop_start, between
    # the thread's creation and its start (an early Ctrl-C): join() raises then. Once started, the
    # network thread sees _thread_terminate and ends.
    deadline = time.monotonic() + 5.0  # for the thread's start
    while True:
        try:
            thread.join()
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)


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


class ConnectFailureLog:
    """Reports failed connection attempts of one paho client: ERROR once per outage, then DEBUG.

    paho-mqtt 2.x retries a ``connect_async`` + ``loop_start`` client forever and tells nobody
    why; its ``on_connect_fail(client, userdata)`` callback (paho 2.2 ``Client.on_connect_fail``)
    carries no reason, but paho calls it from inside the ``except OSError`` around its
    ``reconnect()``, so the ``OSError`` being handled is the reason (``ConnectionRefusedError``,
    a DNS ``gaierror``, an ``ssl.SSLError``...).

    Use: ``client.on_connect_fail = report.on_connect_fail`` and call :meth:`connected` from
    ``on_connect`` (the caller logs its own INFO "connected" line). A broker that answers but
    refuses the CONNECT (bad credentials) reaches ``on_connect`` with a failure reason code instead.

    Args:
        broker: where the client connects (only :meth:`BrokerSettings.safe_url` is logged).
        logger: the owning module's logger.
    """

    def __init__(self, broker: BrokerSettings, logger: logging.Logger) -> None:
        self.broker = broker
        self.log = logger
        #: Failed attempts since the last successful connection.
        self.failures = 0

    def on_connect_fail(self, _client: mqtt.Client, _userdata: object) -> None:
        """paho's ``on_connect_fail`` callback (runs in paho's network thread)."""
        exc = sys.exc_info()[1]
        reason = f"{type(exc).__name__}: {exc}" if exc is not None else "connection failed"
        self.failures += 1
        if self.failures == 1:
            self.log.error("cannot reach broker %s: %s; retrying (repeats logged at DEBUG)", self.broker.safe_url(),
                           reason)
        else:
            self.log.debug("cannot reach broker %s (%d attempts): %s; retrying", self.broker.safe_url(),
                           self.failures, reason)

    def connected(self) -> int:
        """Record a successful connection; returns the failed attempts before it (the next outage logs ERROR again)."""
        failed, self.failures = self.failures, 0
        return failed
