"""What people do to a work order on the desk, each a POST with the session's CSRF token:
acknowledge, complete (notes and photos), add a photo (inspectors of the site), verify (the SMO).
A refused action shows the order's page again with the reason. Design: docs/web.md.
"""

from __future__ import annotations

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from stormwatch.alerts.workorders import WorkOrder, WorkOrderError
from stormwatch.web.accounts import Session, can_act, can_verify
from stormwatch.web.desk import Desk, desk_of
from stormwatch.web.orders import order_context
from stormwatch.web.pages import Forbidden, order_of, render
from stormwatch.web.photos import PhotoError, check_photo


def refuse(request: Request, session: Session, order: WorkOrder, message: str, status: int) -> Response:
    """The order's page again, saying why the action was refused."""
    ctx = order_context(desk_of(request), session, order)
    ctx["error"] = message
    ctx["message"] = ""
    return render(request, "order.html", ctx, status)


async def read_photos(request: Request, session: Session,
                      order: WorkOrder) -> list[tuple[str, bytes, str]] | Response:
    """The form's photos as ``(filename, data, content type)``, each checked; a refusal page for one
    too large or not a photo."""
    desk = desk_of(request)
    out = []
    for item in request.state.form.getlist("photo"):
        if not isinstance(item, UploadFile) or not item.filename:
            continue
        data = await item.read(desk.max_photo_bytes + 1)
        try:
            checked = check_photo(data, item.filename, desk.max_photo_bytes)
        except PhotoError as exc:
            status = 413 if len(data) > desk.max_photo_bytes else 415
            return refuse(request, session, order, f"Photo refused: {exc}.", status)
        out.append((item.filename, checked.data, checked.content_type))
    return out


def acting(desk: Desk, session: Session, oid: str) -> WorkOrder:
    """The order ``oid`` if the user may change it (an inspector of its site).

    Raises:
        Forbidden: anyone else.
    """
    order = order_of(desk, session.user, oid)
    if not can_act(session.user, order.site):
        raise Forbidden(f"only an inspector assigned to site {order.site} may change work order {oid}")
    return order


async def acknowledge(request: Request, session: Session) -> Response:
    """``POST /orders/{oid}/acknowledge``."""
    desk = desk_of(request)
    order = acting(desk, session, request.path_params["oid"])
    try:
        desk.book.acknowledge(order.id, session.user.display_name, str(request.state.form.get("notes") or ""))
    except WorkOrderError as exc:
        return refuse(request, session, order, str(exc), 409)
    return RedirectResponse(f"/orders/{order.id}?done=acknowledged", status_code=303)


async def complete(request: Request, session: Session) -> Response:
    """``POST /orders/{oid}/complete``: notes (required) and photos."""
    desk = desk_of(request)
    order = acting(desk, session, request.path_params["oid"])
    photos = await read_photos(request, session, order)
    if isinstance(photos, Response):
        return photos
    notes = str(request.state.form.get("notes") or "")
    if not notes.strip():
        return refuse(request, session, order, "Write what was inspected, found and done before completing.", 400)
    try:
        for name, data, ctype in photos:
            desk.book.attach_photo(order.id, session.user.display_name, name, ctype, data)
        desk.book.complete(order.id, session.user.display_name, notes)
    except WorkOrderError as exc:
        return refuse(request, session, order, str(exc), 409)
    return RedirectResponse(f"/orders/{order.id}?done=completed", status_code=303)


async def add_photo(request: Request, session: Session) -> Response:
    """``POST /orders/{oid}/photos``."""
    desk = desk_of(request)
    order = acting(desk, session, request.path_params["oid"])
    photos = await read_photos(request, session, order)
    if isinstance(photos, Response):
        return photos
    if not photos:
        return refuse(request, session, order, "Choose a photo to upload.", 400)
    for name, data, ctype in photos:
        desk.book.attach_photo(order.id, session.user.display_name, name, ctype, data)
    return RedirectResponse(f"/orders/{order.id}?done=photo", status_code=303)


async def verify(request: Request, session: Session) -> Response:
    """``POST /orders/{oid}/verify``: the SMO's check of a completed inspection."""
    desk = desk_of(request)
    order = order_of(desk, session.user, request.path_params["oid"])
    if not can_verify(session.user, order.site):
        raise Forbidden("only the SMO may verify a completed inspection")
    try:
        desk.book.verify(order.id, session.user.display_name, str(request.state.form.get("notes") or ""))
    except WorkOrderError as exc:
        return refuse(request, session, order, str(exc), 409)
    return RedirectResponse(f"/orders/{order.id}?done=verified", status_code=303)
