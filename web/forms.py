"""Form bodies of the desk's POSTs, decoded per their charset: the one place forms are parsed.

Starlette's ``request.form()`` (1.x, over python-multipart's ``QuerystringParser``) decodes an
``application/x-www-form-urlencoded`` body's raw bytes as Latin-1 whatever the ``charset`` says:
``notes=café`` sent as UTF-8 but not percent-encoded would be stored as ``cafÃ©``. Here such a body
is decoded with the ``charset`` of its ``Content-Type``, UTF-8 when none is given (the WHATWG URL
Standard, "application/x-www-form-urlencoded parsing": bytes are percent-decoded, then UTF-8
decoded), both the raw bytes and the percent-escapes. ``multipart/form-data`` (photos) is left to
Starlette, which already decodes its fields per the charset (default UTF-8).

Errors: :class:`starlette.exceptions.HTTPException` 400 for an unknown charset, a body that is not
text in its charset or more fields than allowed; 413 for a body larger than :data:`MAX_URLENCODED_BYTES`.
"""

from __future__ import annotations

import codecs
from urllib.parse import parse_qsl

from python_multipart.multipart import parse_options_header
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request

#: Largest url-encoded form body read (bytes): Starlette's own limit of one form field (1 MiB);
#: the desk's forms (notes, a few numbers) are far smaller.
MAX_URLENCODED_BYTES = 1024 * 1024

_URLENCODED = b"application/x-www-form-urlencoded"


async def read_form(request: Request, *, max_files: int, max_fields: int) -> FormData:
    """The fields (and, for multipart, files) of ``request``'s body.

    Args:
        request: a POST.
        max_files: most files a multipart body may hold.
        max_fields: most fields a body may hold.

    Raises:
        HTTPException: 400 (unknown charset, bytes not text in it, too many fields), 413 (too big).
    """
    content_type, params = parse_options_header(request.headers.get("Content-Type", ""))
    if content_type != _URLENCODED:
        return await request.form(max_files=max_files, max_fields=max_fields)
    raw_charset = params.get(b"charset", b"utf-8")
    label = raw_charset.decode("latin-1") if isinstance(raw_charset, bytes) else str(raw_charset)
    try:
        charset = codecs.lookup(label).name
    except LookupError:
        raise HTTPException(400, f"the form's charset {label!r} is not known (send UTF-8)") from None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_URLENCODED_BYTES:
            raise HTTPException(413, f"the form is larger than {MAX_URLENCODED_BYTES // 1024} KiB")
    try:
        text = body.decode(charset)
        items = parse_qsl(text, keep_blank_values=True, encoding=charset, errors="strict",
                          max_num_fields=max_fields)
    except UnicodeDecodeError:
        raise HTTPException(400, f"the form is not {charset} text (its Content-Type says charset={label})") from None
    except ValueError:  # parse_qsl: more than max_num_fields
        raise HTTPException(400, f"too many fields in the form (at most {max_fields})") from None
    fields: list[tuple[str, str | UploadFile]] = list(items)
    return FormData(fields)
