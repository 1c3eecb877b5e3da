"""An SMTP server that requires STARTTLS and AUTH (aiosmtpd), delivering into a Maildir: run by the
notifier tests as a process of its own (``python -m tests.smtp_auth_server PORT MAILDIR CERT KEY USER``,
the password in ``SMTP_TEST_PASSWORD``). Every AUTH attempt is written to standard error as
``auth <login> ok|refused``."""

from __future__ import annotations

import hmac
import os
import signal
import ssl
import sys
import threading
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Mailbox
from aiosmtpd.smtp import AuthResult, LoginPassword


def main() -> None:
    port, maildir, cert, key, user = sys.argv[1:6]
    password = os.environ["SMTP_TEST_PASSWORD"].encode()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
        ok = isinstance(auth_data, LoginPassword) and auth_data.login == user.encode() and \
            hmac.compare_digest(auth_data.password, password)
        login = auth_data.login.decode(errors="replace") if isinstance(auth_data, LoginPassword) else "?"
        print(f"auth {login} {'ok' if ok else 'refused'} ({mechanism}, tls={session.ssl is not None})",
              file=sys.stderr, flush=True)
        return AuthResult(success=ok, handled=False)  # the server answers 235 or 535

    controller = Controller(Mailbox(maildir), hostname="127.0.0.1", port=int(port), tls_context=context,
                            require_starttls=True, auth_required=True, auth_require_tls=True,
                            authenticator=authenticator)
    controller.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    controller.stop()


if __name__ == "__main__":
    main()
