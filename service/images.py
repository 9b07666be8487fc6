"""PNG bodies in and out of the image routes (Pillow); no image processing here."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, UnidentifiedImageError

from service.errors import ApiError

PNG_MEDIA_TYPE = "image/png"
MAX_PIXELS = 4096 * 4096


def decode_png(body: bytes) -> np.ndarray:
    """uint8/uint16 array of shape (H, W) (grey) or (H, W, 3) (colour) from PNG bytes.

    Palette and grey+alpha images become grey, RGBA becomes RGB (alpha is
    dropped). Unreadable bytes are a 400 on ``body``; images over MAX_PIXELS a 413.
    """
    try:
        with Image.open(io.BytesIO(body)) as img:
            if img.format != "PNG":
                raise ApiError(415, "unsupported_media_type", f"expected a PNG image, got {img.format}", "body")
            if img.width * img.height > MAX_PIXELS:
                raise ApiError(413, "too_large", f"image of {img.width}x{img.height} pixels is over the limit "
                               f"of {MAX_PIXELS} pixels", "body")
            if img.mode in ("I;16", "I;16B", "I;16L", "I"):
                array = np.asarray(img, dtype=np.uint16 if img.mode.startswith("I;16") else np.int32)
                if array.dtype == np.int32:
                    array = np.clip(array, 0, 65535).astype(np.uint16)
            elif img.mode in ("L", "P", "LA", "1"):
                array = np.asarray(img.convert("L"))
            else:
                array = np.asarray(img.convert("RGB"))
    except ApiError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise ApiError(400, "bad_request", f"request body is not a readable PNG image: {exc}", "body") from None
    return np.ascontiguousarray(array)


def encode_png(array: np.ndarray) -> bytes:
    """PNG bytes of a uint8 or uint16 image of shape (H, W) or (H, W, 3)."""
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()
