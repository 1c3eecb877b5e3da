"""Logging in and out of the web desk: the login form (with its own CSRF cookie, as there is no
session yet), the check of a user name and password -- throttled per account and client address
(:mod:`stormwatch.web.throttle`) -- and the session cookie, a new one at every login (the one the
browser held ends). Design: docs/web.md.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from stormwatch.web.accounts import Session
from stormwatch.web.desk import desk_of
from stormwatch.web.forms import read_form
from stormwatch.web.pages import LOGIN_CSRF_COOKIE, SESSION_COOKIE, templates
from stormwatch.web.throttle import Lock

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
    name, address = str(form.get("username") or ""), request.client.host if request.client else "?"
    throttle = desk.accounts.throttle
    lock = throttle.locked(name, address)
    if lock is not None:  # not even checked: the right password is refused too
        log.info("login of %r from %s refused: %s %r locked until %s", name, address, lock.kind, lock.name,
                 _utc(lock.until))
        return _throttled(request, token, target, "", lock, throttle.now())
    user = desk.accounts.authenticate(name, str(form.get("password") or ""))
    if user is None:
        log.warning("failed login for %r from %s", name, address)
        lock = throttle.failed(name, address)
        if lock is not None:
            return _throttled(request, token, target, "Unknown user name or wrong password. ", lock, throttle.now())
        return _login_page(request, token, target, "Unknown user name or wrong password.", 401)
    throttle.succeeded(user.name)
    held = request.cookies.get(SESSION_COOKIE)
    if held:  # a new session token at every login; the one the browser held ends (session fixation)
        desk.accounts.end_session(held)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(SESSION_COOKIE, desk.accounts.start_session(user), httponly=True, samesite="lax",
                        secure=desk.secure_cookies)
    response.delete_cookie(LOGIN_CSRF_COOKIE)
    log.info("%s (%s) logged in", user.name, user.role)
    return response


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def retry_message(lock: Lock, now: float) -> str:
    """What a person is told while ``lock`` holds: whose logins are refused, until when, and who can
    lift it."""
    left = max(1, round(lock.until - now))
    wait = f"{left // 60} min {left % 60} s" if left >= 60 else f"{left} s"
    what = "this account" if lock.kind == "account" else "logins from your network address"
    return (f"Too many failed logins for {what}: try again after {_utc(lock.until)} (in {wait}), or ask the "
            "SMO to unlock it.")


def _throttled(request: Request, token: str, target: str, first: str, lock: Lock, now: float) -> Response:
    """The login page refusing a login while ``lock`` holds (HTTP 429, ``Retry-After``)."""
    response = _login_page(request, token, target, first + retry_message(lock, now), 429)
    response.headers["Retry-After"] = str(max(1, round(lock.until - now)))
    return response


async def logout(request: Request, session: Session) -> Response:
    """``POST /logout``: the session ended, back to the login page."""
    desk_of(request).accounts.end_session(request.cookies.get(SESSION_COOKIE, ""))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response
