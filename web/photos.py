"""Inspection photos: what an upload must be before it is kept with a work order.

* at most ``max_bytes`` (default :data:`DEFAULT_MAX_BYTES`, 10 MiB: a 12-megapixel phone JPEG is
  3-5 MB);
* a JPEG, PNG or WebP image, decided by decoding it with Pillow -- never by the file name or the
  browser's ``Content-Type``, which a client chooses freely;
* at most :data:`MAX_PIXELS` pixels (a small file that decodes to a huge image is refused).

Errors: :class:`PhotoError` with a message for the person who uploaded it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

#: Default upload limit (bytes).
DEFAULT_MAX_BYTES = 10 * 1024 * 1024

#: Largest image accepted (pixels): 50 megapixels, above any phone camera.
MAX_PIXELS = 50_000_000

#: Pillow format → the content type the photo is stored and served with.
TYPES = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp"}


def size_text(n: int) -> str:
    """A byte count for people: ``10 MiB``, ``97.7 KiB``."""
    if n >= 1048576:
        return f"{n / 1048576:.3g} MiB"
    return f"{n / 1024:.3g} KiB"


class PhotoError(ValueError):
    """An upload that is not an acceptable photo; the message says why."""


@dataclass(frozen=True)
class CheckedPhoto:
    """An accepted photo: its bytes, the content type its decoded format gives, and its size in pixels."""

    data: bytes
    content_type: str
    width: int
    height: int


def check_photo(data: bytes, filename: str, max_bytes: int = DEFAULT_MAX_BYTES) -> CheckedPhoto:
    """Accept ``data`` as a photo or say why not.

    Raises:
        PhotoError: empty, larger than ``max_bytes``, not a JPEG/PNG/WebP image, corrupt, or too many pixels.
    """
    name = filename or "the file"
    if not data:
        raise PhotoError(f"{name} is empty")
    if len(data) > max_bytes:
        raise PhotoError(f"{name} is larger than {size_text(max_bytes)}, the most a photo may be")
    try:
        with Image.open(io.BytesIO(data)) as img:
            fmt = img.format or ""
            width, height = img.size
            if fmt not in TYPES:
                raise PhotoError(f"{name} is a {fmt or 'unknown'} file; photos must be JPEG, PNG or WebP images")
            if width * height > MAX_PIXELS:
                raise PhotoError(f"{name} is {width}×{height} pixels; at most {MAX_PIXELS // 1_000_000} megapixels")
            img.verify()
    except PhotoError:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError):
        raise PhotoError(f"{name} is not an image; photos must be JPEG, PNG or WebP images") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise PhotoError(f"{name} is not a readable image ({exc})") from None
    return CheckedPhoto(data=data, content_type=TYPES[fmt], width=width, height=height)
