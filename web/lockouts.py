"""The SMO's page of login lockouts (``/lockouts``): the accounts and client addresses whose logins
are refused now (:mod:`stormwatch.web.throttle`), each with a button that lifts it
(``POST /lockouts/unlock``, the session's CSRF token). Design: docs/web.md, "Guessing passwords".
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from stormwatch.web.accounts import Session
from stormwatch.web.desk import desk_of
from stormwatch.web.pages import Forbidden, render


def _smo(session: Session) -> None:
    if session.user.role != "smo":
        raise Forbidden("only the SMO sees and lifts login lockouts")


async def lockouts_page(request: Request, session: Session) -> Response:
    """``GET /lockouts``: the lockouts in force (the SMO only)."""
    _smo(session)
    locks = desk_of(request).accounts.throttle.locks()
    rows = [{"kind": lk.kind, "name": lk.name, "failures": lk.failures,
             "until": datetime.fromtimestamp(lk.until, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")} for lk in locks]
    return render(request, "lockouts.html", {"locks": rows, "unlocked": request.query_params.get("unlocked", "")})


async def unlock(request: Request, session: Session) -> Response:
    """``POST /lockouts/unlock`` (``kind``: account or address, ``name``): lift it (the SMO only)."""
    _smo(session)
    form = request.state.form
    kind, name = str(form.get("kind") or ""), str(form.get("name") or "").strip()
    if kind not in ("account", "address") or not name:
        raise HTTPException(400, "say which account or address to unlock")
    desk_of(request).accounts.throttle.unlock(kind, name, by=f"{session.user.name} (web desk)")  # type: ignore[arg-type]
    return RedirectResponse(f"/lockouts?unlocked={quote(f'{kind} {name}')}", status_code=303)
