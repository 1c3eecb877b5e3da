"""stormwatch.runtime.mqtt: ending paho's network thread."""

from __future__ import annotations

import threading

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch.runtime.mqtt import stop_network_loop


class _EndsWhenTold(mqtt.Client):
    """A client whose network thread ends -- clearing paho's reference to it -- the moment it is told to
    terminate: right between paho's check of the reference and its join, the window a stopping ingest
    once met on a busy machine."""

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if name == "_thread_terminate" and value is True:
            thread = self.__dict__.get("_thread")
            if thread is not None and thread is not threading.current_thread():
                thread.join()


def test_paho_loop_stop_has_the_race() -> None:
    # the behaviour stop_network_loop exists for: if paho fixes it, this fails and the helper can go
    client = _EndsWhenTold(CallbackAPIVersion.VERSION2, client_id="race-paho")
    client.loop_start()
    with pytest.raises(AttributeError):
        client.loop_stop()


def test_a_thread_ending_as_it_is_stopped_is_stopped_without_error() -> None:
    client = _EndsWhenTold(CallbackAPIVersion.VERSION2, client_id="race-ours")
    client.loop_start()
    thread = client._thread
    assert thread is not None
    stop_network_loop(client)
    assert not thread.is_alive() and client._thread is None


def test_a_client_without_a_thread_is_left_alone() -> None:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="no-thread")
    stop_network_loop(client)
    assert client._thread is None


def test_a_thread_not_started_yet_is_waited_for_and_ended() -> None:
    # a stop from another thread while the service's thread is inside loop_start: created, not started
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="not-started")
    client._sockpairR, client._sockpairW = mqtt._socketpair_compat()
    client._thread_terminate = False
    thread = client._thread = threading.Thread(target=client._thread_main, daemon=True)
    errors: list[BaseException] = []

    def stop() -> None:
        try:
            stop_network_loop(client)
        except BaseException as exc:
            errors.append(exc)

    stopping = threading.Thread(target=stop)
    stopping.start()
    thread.start()  # what loop_start does next; the thread sees it must terminate
    stopping.join(10)
    assert not errors and not stopping.is_alive() and not thread.is_alive()
