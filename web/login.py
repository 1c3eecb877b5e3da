"""Logging in and out of the web desk: the login form (with its own CSRF cookie, as there is no
session yet), the check of a user name and password, and the session cookie. Design: docs/web.md.
"""

from __future__ import annotations

import hmac
import logging
import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from stormwatch.web.accounts import Session
from stormwatch.web.desk import desk_of
from stormwatch.web.forms import read_form
from stormwatch.web.pages import LOGIN_CSRF_COOKIE, SESSION_COOKIE, templates

log = logging.getLogger(__name__)


def _login_page(request: Request, token: str, target: str, message: str, status: int = 200) -> Response:
    return templates().TemplateResponse(request, "login.html", {
        "user": None, "csrf": token, "message": message, "next": target, "now": None, "clock_note": ""},
        status_code=status)


async def login_form(request: Request) -> Response:
    """``GET /login``: the form, and a CSRF cookie its POST must match."""
    token = request.cookies.get(LOGIN_CSRF_COOKIE) or secrets.token_urlsafe(24)
    message = "Your session has ended; log in again." if request.query_params.get("expired") else ""
    response = _login_page(request, token, request.query_params.get("next", "/"), message)
    response.set_cookie(LOGIN_CSRF_COOKIE, token, httponly=True, samesite="strict",
                        secure=desk_of(request).secure_cookies)
    return response


async def login(request: Request) -> Response:
    """``POST /login``: a session for a known user and the right password, then on to ``next`` (a path
    of this site only)."""
    desk = desk_of(request)
    form = await read_form(request, max_files=0, max_fields=5)
    token = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    sent = str(form.get("csrf_token") or "")
    target = str(form.get("next") or "/")
    if not target.startswith("/") or target.startswith("//"):
        target = "/"
    if not token or not hmac.compare_digest(sent.encode(), token.encode()):
        return _login_page(request, token, target,
                           "The login form was out of date (missing CSRF token); try again.", 403)
    user = desk.accounts.authenticate(str(form.get("username") or ""), str(form.get("password") or ""))
    if user is None:
        log.warning("failed login for %r from %s", str(form.get("username") or ""),
                    request.client.host if request.client else "?")
        return _login_page(request, token, target, "Unknown user name or wrong password.", 401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(SESSION_COOKIE, desk.accounts.start_session(user), httponly=True, samesite="lax",
                        secure=desk.secure_cookies)
    response.delete_cookie(LOGIN_CSRF_COOKIE)
    log.info("%s (%s) logged in", user.name, user.role)
    return response


async def logout(request: Request, session: Session) -> Response:
    """``POST /logout``: the session ended, back to the login page."""
    desk_of(request).accounts.end_session(request.cookies.get(SESSION_COOKIE, ""))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response
