"""Helpers of the store tests: an HTTP front of a real InfluxDB that refuses writes as a busy one does."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class BusyFront:
    """HTTP front of ``upstream``: the first ``refuse_writes`` ``/write`` requests get ``status`` with
    ``message`` (and ``Retry-After`` unless ``None``); the rest pass unchanged.

    Counts concurrent ``/write`` requests (``max_in_flight``) and the lines of forwarded writes.
    """

    def __init__(self, upstream: str, status: int, retry_after: str | None, *, refuse_writes: int = 1,
                 message: bytes = b'{"error":"busy, try later"}') -> None:
        self.refused: list[float] = []
        self.forwarded_writes: list[float] = []
        self.forwarded_lines = 0
        self.in_flight = 0
        self.max_in_flight = 0
        lock = threading.Lock()
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as InfluxDB itself

            def do_POST(self) -> None:
                is_write = self.path.startswith("/write")
                with lock:
                    if is_write:
                        front.in_flight += 1
                        front.max_in_flight = max(front.max_in_flight, front.in_flight)
                    refuse = is_write and len(front.refused) < refuse_writes
                    if refuse:
                        front.refused.append(time.monotonic())
                try:
                    self._answer(refuse, is_write)
                finally:
                    if is_write:
                        with lock:
                            front.in_flight -= 1

            def _answer(self, refuse: bool, is_write: bool) -> None:
                arrived = time.monotonic()
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if refuse:
                    self.send_response(status)
                    if retry_after is not None:
                        self.send_header("Retry-After", retry_after)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(message)))
                    self.end_headers()
                    self.wfile.write(message)
                    return
                req = urllib.request.Request(upstream + self.path, data=body, method="POST")
                if self.headers.get("Content-Type"):
                    req.add_header("Content-Type", self.headers["Content-Type"])
                try:
                    with urllib.request.urlopen(req, timeout=10) as resp:
                        code, payload = resp.status, resp.read()
                except urllib.error.HTTPError as exc:
                    code, payload = exc.code, exc.read()
                if is_write:
                    with lock:
                        front.forwarded_writes.append(arrived)
                        front.forwarded_lines += len(body.splitlines()) if code < 300 else 0
                self.send_response(code)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
