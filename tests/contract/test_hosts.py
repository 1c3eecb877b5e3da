"""Hosts a user writes (a Modbus TCP device's host, a broker URL's): an IP address or an RFC 1123
host name, else one clear reason -- never a connection retried forever to a name no resolver knows."""

from __future__ import annotations

import pytest

from stormwatch.hosts import host_problem
from stormwatch.runtime.mqtt import BrokerUrlError, parse_broker_url


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "fe80::1", "localhost", "mosquitto", "mqtt.example.com",
                                  "mqtt.example.com.", "stormwatch_mqtt_1", "gw-1.site-7.example", "a" * 63,
                                  ".".join(["a" * 63] * 3) + "." + "a" * 61])  # 253 characters
def test_addresses_and_host_names_are_hosts(host: str) -> None:
    assert host_problem(host) is None


@pytest.mark.parametrize(("host", "why"), [
    ("not a host!!", "' ' is not allowed in a host name"),
    ("bad host", "' ' is not allowed in a host name"),
    ("caf\xe9.example", "'\xe9' is not allowed in a host name"),  # an IDN is written in its A-label (xn--)
    ("-gw.example", "label '-gw' starts or ends with '-'"),
    ("a..b", "an empty label"),
    ("a" * 64, "a host name label of 64 characters (at most 63"),
    (".".join(["a" * 63] * 4), "a host name of 255 characters (at most 253"),
    ("999.1.1.1", "not an IPv4 address (four numbers 0-255)"),
    ("", "an empty host name"),
])
def test_what_is_not_a_host_says_why(host: str, why: str) -> None:
    problem = host_problem(host)
    assert problem is not None and why in problem


def test_a_broker_url_names_its_bad_host_and_a_good_one_parses() -> None:
    with pytest.raises(BrokerUrlError, match=r"^bad broker URL: host 'bad host' is not a host: ' ' is not allowed"):
        parse_broker_url("mqtt://bad host", env={})
    with pytest.raises(BrokerUrlError, match=r"^bad broker URL node 'x_y!:1884': host 'x_y!' is not a host"):
        parse_broker_url("mqtt://a:1883,x_y!:1884", env={})
    broker = parse_broker_url("mqtt://[::1]:1884,mosquitto_2", env={})
    assert broker.endpoints == (("::1", 1884), ("mosquitto_2", 1883))


@pytest.mark.parametrize("url", ["mqtt://h:1883/extra/path", "mqtts://h/x", "h:1883/a?protocol=5",
                                 "mqtt://a:1883,b:1884/topic"])
def test_a_broker_url_with_a_path_is_refused_not_ignored(url: str) -> None:
    with pytest.raises(BrokerUrlError, match=r"^broker URL has a path '/"):
        parse_broker_url(url, env={})


@pytest.mark.parametrize("url", ["mqtt://h:1883/", "mqtt://h:1883/?protocol=5", "mqtt://a:1883,b:1884/"])
def test_a_broker_url_may_end_in_a_slash(url: str) -> None:
    assert parse_broker_url(url, env={}).host in ("h", "a")
