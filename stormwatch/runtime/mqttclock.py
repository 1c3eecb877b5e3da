"""The lockstep clock shared over MQTT by processes run apart (``--clock mqtt``).

The simulator (:class:`MqttConductor`) is the authority: it publishes the current instant, retained,
on ``stormwatch/v1/SITE/clock/now``. Each participant process (gateway, ingest, alerts) holds a
:class:`FollowerClock` -- a :class:`~stormwatch.lockstep.LockstepClock` whose instant comes from that
topic -- and publishes, retained, with a last will that marks it gone, ``done up to T`` (and the
next instant it needs) on ``.../clock/done/NAME`` once its workers and participants are done with
T. The simulator moves to the earliest instant anyone needs only when every registered participant
is done with the current one; a participant that joins late or restarts reads the retained instant
and catches up. One silent beyond ``wait_s`` real seconds stops the clock with one line naming it
and what it owes; the clock moves on when it comes back -- never a silent skip.

The design: docs/simulators.md ("The lockstep clock between processes").
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from stormwatch import topics
from stormwatch.lockstep import MAX_POLL_S, POLL_S, LockstepClock
from stormwatch.runtime.mqtt import parse_broker_url, stop_network_loop

log = logging.getLogger(__name__)

#: Real seconds a participant may stay silent before the simulator says whom it waits for.
DEFAULT_WAIT_S = 30.0
#: The participants the simulator waits for unless told otherwise.
DEFAULT_PARTICIPANTS = ("gateway", "ingest", "alerts")


def clock_topic(site: str) -> str:
    return f"{topics.ROOT}/{site}/clock/now"


def done_topic(site: str, name: str) -> str:
    return f"{topics.ROOT}/{site}/clock/done/{name}"


def _client(broker_url: str, client_id: str) -> mqtt.Client:
    broker = parse_broker_url(broker_url)
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=MQTTProtocolVersion.MQTTv311)
    client.on_socket_open = _no_delay
    if broker.username:
        client.username_pw_set(broker.username, broker.password)
    client.connect_async(broker.host, broker.port, keepalive=10)
    return client


def _no_delay(_client: mqtt.Client, _userdata: Any, sock: Any) -> None:
    """Each small PUBLISH at once (Nagle's algorithm would hold it for the previous one's ACK)."""
    import socket
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (OSError, AttributeError):
        pass


def _iso(t: datetime) -> str:
    return t.isoformat()


class _Done:
    """What one participant last said."""

    def __init__(self, msg: dict[str, Any] | None) -> None:
        self.gone = msg is None or msg.get("gone", False)
        self.run = None if msg is None else msg.get("run")
        self.t = None if self.gone or msg is None or msg.get("t") is None else datetime.fromisoformat(msg["t"])
        self.next = None if self.gone or msg is None or msg.get("next") is None else datetime.fromisoformat(msg["next"])
        self.made = {} if msg is None else dict(msg.get("made", {}))
        self.seen = None if msg is None else msg.get("seen")
        self.owes = None if msg is None else msg.get("owes")


class MqttConductor:
    """The simulator's side: moves ``clock`` (the simulated devices' clock) instant by instant.

    Args:
        clock: the simulator's own lockstep clock (its instant is set here; nobody else moves it).
        broker_url: the MQTT broker.
        site: the site id (the clock's topics are the site's).
        participants: names that must be done with each instant (``--lockstep-participants``).
        wait_s: real seconds of silence before the one line naming whom it waits for.
    """

    def __init__(self, clock: LockstepClock, broker_url: str, site: str,
                 participants: Iterable[str] = DEFAULT_PARTICIPANTS, wait_s: float = DEFAULT_WAIT_S) -> None:
        self.clock = clock
        self.site = site
        self.names = list(participants)
        self.wait_s = wait_s
        self.run_id = uuid.uuid4().hex[:8]
        self.instants = 0
        self._done: dict[str, _Done] = {}
        self._made: dict[str, int] = {}  # per gateway boot: readings confirmed stored
        self._cond = threading.Condition()
        self._connected = threading.Event()
        self.client = _client(broker_url, f"stormwatch-clock-{site}-{self.run_id}")
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message

    def _on_connect(self, client: mqtt.Client, *_: Any) -> None:
        client.subscribe(done_topic(self.site, "+"), qos=1)
        self._connected.set()

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        name = msg.topic.rsplit("/", 1)[-1]
        body = json.loads(msg.payload) if msg.payload else None
        done = _Done(body)
        if done.run not in (None, self.run_id):
            return  # a retained word from an earlier run
        with self._cond:
            self._done[name] = done
            for boot, n in done.made.items():
                self._made[boot] = max(self._made.get(boot, 0), int(n))
            self._cond.notify_all()

    def made(self) -> int:
        return sum(self._made.values())

    def _publish(self, final: bool = False, hold: bool = False) -> None:
        body = {"run": self.run_id, "t": _iso(self.clock.now()), "start": _iso(self.clock.sim_start),
                "end": _iso(self.clock.sim_end), "made": self.made(), "by_boot": dict(self._made), "final": final,
                "hold": hold}
        self.client.publish(clock_topic(self.site), json.dumps(body), qos=1, retain=True)

    def owed(self, joining: bool = False) -> list[str]:
        """Who the clock waits for at the current instant, and what each owes (``joining``: who has
        not said it is ready -- subscribed -- before the first instant)."""
        t, made, out = self.clock.now(), self.made(), []
        for name in self.names:
            d = self._done.get(name)
            if d is None or d.gone:
                out.append(f"{name} ({'gone: its last will' if d is not None else 'not joined'}; owes done up to "
                           f"{_iso(t)})")
            elif joining:
                continue
            elif d.t is None or d.t < t:
                out.append(f"{name} (owes done up to {_iso(t)}{'; ' + d.owes if d.owes else ''})")
            elif (missing := self._not_taken(d.seen, made)) > 0:
                out.append(f"{name} ({missing} readings not taken yet)")
        return out

    def _not_taken(self, seen: int | dict[str, int] | None, made: int) -> int:
        """Readings made that a participant has not taken: by count, or per gateway boot (an engine
        restarted mid-run counts what it read from the store; the readings made before it died are
        not delivered to it again)."""
        if seen is None:
            return 0
        if isinstance(seen, dict):
            return sum(max(0, n - int(seen.get(boot, 0))) for boot, n in self._made.items())
        return made - int(seen)

    def run(self) -> None:
        """Move the clock from its start to its end; returns at the end (the clock finished)."""
        self.client.loop_start()
        try:
            if not self._connected.wait(30):
                raise RuntimeError("the simulated clock could not reach the MQTT broker")
            self._publish(hold=True)
            self._settle(joining=True)
            self._publish()
            while True:
                self._settle()
                t = self.clock.now()
                if t >= self.clock.sim_end:
                    break
                wanted = [d.next for n in self.names if (d := self._done.get(n)) is not None and d.next is not None]
                nxt = min([*[w for w in wanted if w > t], self.clock.sim_end])
                with self.clock._cond:
                    self.clock._t = nxt
                    self.instants += 1
                    self.clock._cond.notify_all()
                self._publish()
            self.clock.finish()
            self._publish(final=True)
        finally:
            stop_network_loop(self.client)
            self.client.disconnect()

    def _settle(self, joining: bool = False) -> None:
        """Return once every participant is done with the current instant; say once whom it waits for
        when one stays silent ``wait_s`` real seconds (or leaves its last will)."""
        said = ""
        published_made = self.made()
        quiet_since = time.monotonic()
        nap = POLL_S
        with self._cond:
            while True:
                owed = self.owed(joining)
                if not owed:
                    if said:
                        log.warning("the simulated clock moves on at %s", _iso(self.clock.now()))
                    return
                if self.made() != published_made:  # the gateway's readings: the engine now owes them
                    published_made = self.made()
                    self._publish()
                gone = any("gone" in o for o in owed)
                line = ", ".join(owed)
                if line != said and (gone or time.monotonic() - quiet_since >= self.wait_s):
                    log.warning("the simulated clock stopped at %s: waiting for %s", _iso(self.clock.now()), line)
                    said = line
                if self._cond.wait(nap):
                    quiet_since = time.monotonic()
                    nap = POLL_S
                else:
                    nap = min(2 * nap, MAX_POLL_S)


class FollowerClock(LockstepClock):
    """A participant's clock: the instant is the simulator's; done is said on MQTT.

    Workers (a gateway's polling threads) and participants (:class:`~stormwatch.lockstep.Participant`)
    join it as they would an in-process clock; :meth:`run` (in a thread) replaces the conductor.
    """

    follows_mqtt = True

    def __init__(self, broker_url: str, site: str, name: str, *,
                 seen: Callable[[], int | dict[str, int]] | None = None,
                 made: Callable[[], dict[str, int]] | None = None, wait_s: float | None = None,
                 workers: bool = False) -> None:
        self.site, self.name = site, name
        self.seen, self.made_by = seen, made
        self._latest: dict[str, Any] | None = None
        self._got = threading.Condition()
        self.client = _client(broker_url, f"stormwatch-clock-{site}-{name}-{uuid.uuid4().hex[:6]}")
        self.client.will_set(done_topic(site, name), json.dumps({"gone": True}), qos=1, retain=True)
        self.client.on_connect = lambda c, *_: c.subscribe(clock_topic(site), qos=1)
        self.client.on_message = self._on_message
        self.client.loop_start()
        first = self._first(wait_s)
        super().__init__(datetime.fromisoformat(first["start"]), datetime.fromisoformat(first["end"]))
        self._t = datetime.fromisoformat(first["t"])
        if not workers:
            self._joined.set()

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        if not msg.payload:
            return
        with self._got:
            self._latest = json.loads(msg.payload)
            self._got.notify_all()
        if hasattr(self, "_cond"):
            self.poke()

    def _first(self, wait_s: float | None) -> dict[str, Any]:
        log.info("%s: waiting for the simulated clock on %s", self.name, clock_topic(self.site))
        deadline = None if wait_s is None else time.monotonic() + wait_s
        with self._got:
            while self._latest is None or self._latest.get("final"):
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"no simulated clock on {clock_topic(self.site)} within {wait_s:g} s")
                self._got.wait(0.5)
            return dict(self._latest)

    @property
    def run_made(self) -> int:
        with self._got:
            return int((self._latest or {}).get("made", 0))

    def not_taken(self, taken: dict[str, int]) -> int:
        """Readings made (each gateway boot's count, from the simulator) beyond ``taken`` per boot."""
        with self._got:
            made = dict((self._latest or {}).get("by_boot", {}))
        return sum(max(0, int(n) - taken.get(boot, 0)) for boot, n in made.items())

    def _say_done(self, t: datetime, nxt: datetime | None) -> None:
        body: dict[str, Any] = {"run": (self._latest or {}).get("run"), "t": _iso(t),
                                "next": None if nxt is None else _iso(nxt)}
        if self.seen is not None:
            body["seen"] = self.seen()
        if self.made_by is not None:
            body["made"] = self.made_by()
        self.client.publish(done_topic(self.site, self.name), json.dumps(body), qos=1, retain=True)

    def _wanted(self) -> datetime | None:
        t = self._t
        wanted = [w.target for w in self._workers if w.target is not None and w.target > t]
        wanted += [x for x in self._timers if x > t]
        wanted += [d for p in self._participants if (d := p.next_due(t)) is not None]
        return min(wanted) if wanted else None

    def say_ready(self) -> None:
        """Tell the simulator this participant listens (subscribed): the first instant may begin."""
        with self._got:
            run = (self._latest or {}).get("run")
        self.client.publish(done_topic(self.site, self.name), json.dumps({"run": run, "ready": True}), qos=1,
                            retain=True)

    def wait_released(self) -> None:
        """Until every participant is ready and the first instant begins."""
        with self._got:
            while (self._latest or {}).get("hold"):
                self._got.wait(0.5)

    def run(self, *, stall_s: float = float("inf"), joined_timeout_s: float = 30.0) -> None:
        """Say ready, then follow the simulator's instants until its last one; say done with each
        (a gateway's: once its polling threads have joined)."""
        self.say_ready()
        self._joined.wait()
        said: tuple[Any, ...] | None = None
        while not self._finished:
            self._settle(stall_s)
            for p in self._participants:
                p.at(self._t)
            self._settle(stall_s)
            with self._cond:
                t = self._t
                key = (t, self.seen() if self.seen else None, self.run_made)
            if key != said:
                self._say_done(t, self._wanted())
                said = key
            with self._got:
                latest = dict(self._latest or {})
                if datetime.fromisoformat(latest["t"]) <= t and not latest.get("final"):
                    self._got.wait(0.05)
                    latest = dict(self._latest or {})
            nxt = datetime.fromisoformat(latest["t"])
            with self._cond:
                if nxt > self._t:
                    self._t = nxt
                    self.instants += 1
                if latest.get("final") and self._t >= self.sim_end:
                    self._finished = True
                self._cond.notify_all()

    def close(self) -> None:
        """Leave the clock done up to its end (a participant that stops at ``--until`` owes nothing more)."""
        self._say_done(self.sim_end, None)
        stop_network_loop(self.client)
        self.client.disconnect()
