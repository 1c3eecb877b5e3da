"""The web desk of ``stormwatch demo --web``: the demo's store and work orders on a local page.

It starts before the simulated site, so a newcomer watches the portfolio fill while the storm
runs, and keeps serving after the run until Ctrl-C. Two accounts are made (or given new passwords)
in the demo's state directory, and their passwords printed: ``inspector`` (the demo site) and ``smo``.
"""

from __future__ import annotations

import secrets
import socket
import threading
from datetime import datetime
from pathlib import Path

from stormwatch.web.accounts import AccountError, Accounts
from stormwatch.web.server import WEB_FILE, DeskSettings, WebServer, open_desk

#: The demo's accounts: name → (role, name in the work-order history).
DEMO_USERS = {"inspector": ("inspector", "Demo Inspector"), "smo": ("smo", "Demo SMO")}


class DemoDesk:
    """The desk over a demo's ``workdir`` (``stormwatch.db`` and ``alerts.db``).

    Args:
        site_file: the demo's site file.
        site_id: its id (the inspector's site).
        workdir: the demo's state directory.
        port: TCP port on 127.0.0.1 (0: a free one).
        sock: a socket already listening there (:func:`stormwatch.runtime.cliutil.listen_socket`).
        starting: the run's first instant: "Now" until its alert engine records its clock.

    Raises:
        DeskSetupError: the desk cannot open the demo's files.
    """

    def __init__(self, site_file: Path, site_id: str, workdir: Path, port: int,
                 sock: socket.socket | None = None, starting: datetime | None = None) -> None:
        self.passwords: dict[str, str] = {}
        accounts = Accounts(workdir / WEB_FILE)
        try:
            for name, (role, display) in DEMO_USERS.items():
                password = secrets.token_urlsafe(9)
                try:
                    accounts.get(name)
                    accounts.set_password(name, password)
                except AccountError:
                    accounts.add(name, role, password, sites=[site_id] if role != "smo" else [], display_name=display)
                self.passwords[name] = password
        finally:
            accounts.close()
        desk = open_desk(DeskSettings(sites=[site_file], store_url=f"sqlite:///{(workdir / 'stormwatch.db').resolve()}",
                                      state_dir=workdir, create_store=True, starting=starting))
        self.server = WebServer(desk, "127.0.0.1", port, sock)

    def start(self) -> str:
        """Serve in the background; returns the lines telling the user where and how to log in."""
        self.server.start()
        logins = ", ".join(f"{name} / {pw}" for name, pw in self.passwords.items())
        return f"web desk: {self.server.url}  (log in as {logins})"

    def wait(self) -> None:
        """Block until Ctrl-C (KeyboardInterrupt)."""
        threading.Event().wait()

    def close(self) -> None:
        self.server.close()
