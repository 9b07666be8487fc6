"""PNG bodies in and out of the image routes (Pillow); no image processing here.

A PNG's size is read from its header (`png_header`) and checked against the
pixel limit before Pillow decodes anything, so a small file that declares a
huge image costs nothing. `image_patch_plan` turns the patch geometry of an
image request (`kpca.images.patches.patch_plan`) into the route's 422.
"""

from __future__ import annotations

import io
import json
import struct
import zlib

import numpy as np
from PIL import Image, UnidentifiedImageError
from starlette.requests import Request
from starlette.responses import Response

from kpca.images.patches import PatchPlan, channels_of, patch_plan
from service.binary_answers import BYTES_MEDIA_TYPE, answer_media_type, binary_content
from service.errors import ApiError
from service.security import access

PNG_MEDIA_TYPE = "image/png"
#: the media types a PNG body may be sent as (`service.binary_answers`); the bytes are a PNG's either way
#: (`png_header` checks the signature)
PNG_BODY_MEDIA_TYPES = (PNG_MEDIA_TYPE, BYTES_MEDIA_TYPE)
#: ``openapi_extra`` of a route that reads a PNG body itself (`read_body`): the body the document declares
PNG_REQUEST_BODY = {"requestBody": {"required": True, "description": "a PNG image (grey or colour)",
                                    "content": binary_content(PNG_MEDIA_TYPE)}}


def png_body(scope: str) -> dict:
    """``openapi_extra`` of a route whose body is a PNG (`PNG_REQUEST_BODY`) and whose access is ``scope``
    (`service.security.access`): the PNG's media types are the ones accepted."""
    return {**access(scope, *PNG_BODY_MEDIA_TYPES), **PNG_REQUEST_BODY}


#: a PNG answer as the document declares it (`png_answer` picks the type sent)
PNG_RESPONSE_CONTENT = binary_content(PNG_MEDIA_TYPE)


def png_answer(request: Request, body: bytes, headers: dict | None = None) -> Response:
    """A PNG's bytes as the answer: ``image/png``, or octet-stream to a client that asks for only that
    (`service.binary_answers.answer_media_type`). O(1)."""
    return Response(content=body, media_type=answer_media_type(request, PNG_MEDIA_TYPE), headers=headers)
MAX_PIXELS = 2048 * 2048  # default of Settings.max_image_pixels
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# colour type -> (channels, allowed bit depths), PNG specification §11.2.2
PNG_COLOUR_TYPES = {0: (1, (1, 2, 4, 8, 16)), 2: (3, (8, 16)), 3: (1, (1, 2, 4, 8)), 4: (2, (8, 16)),
                    6: (4, (8, 16))}


def _unreadable(reason: str) -> ApiError:
    return ApiError(400, "bad_request", f"request body is not a readable PNG image: {reason}", "body")


def png_header(body: bytes | bytearray) -> tuple[int, int, int, int]:
    """``(width, height, bit_depth, channels)`` from a PNG's signature and IHDR chunk, nothing decoded.

    Not a PNG (no signature), a short or inconsistent
    header (bad CRC, zero size, a bit depth the colour type does not allow,
    unknown compression, filter or interlace method) a 400 on ``body``.
    """
    if not body.startswith(PNG_SIGNATURE):
        raise _unreadable("the body does not start with the PNG signature")
    ihdr = body[8:33]
    if len(ihdr) < 25 or ihdr[4:8] != b"IHDR" or struct.unpack(">I", ihdr[:4])[0] != 13:
        raise _unreadable("no IHDR header chunk after the signature")
    width, height, depth, colour, compression, filtering, interlace = struct.unpack(">IIBBBBB", ihdr[8:21])
    if struct.unpack(">I", ihdr[21:25])[0] != zlib.crc32(ihdr[4:21]):
        raise _unreadable("the IHDR header chunk's CRC does not match")
    if not (0 < width < 2**31 and 0 < height < 2**31):
        raise _unreadable(f"the header declares a {width}x{height} image")
    if colour not in PNG_COLOUR_TYPES or depth not in PNG_COLOUR_TYPES[colour][1]:
        raise _unreadable(f"colour type {colour} with bit depth {depth} is not a valid combination")
    if compression != 0 or filtering != 0 or interlace not in (0, 1):
        raise _unreadable("unknown compression, filter or interlace method in the header")
    return width, height, depth, PNG_COLOUR_TYPES[colour][0]


def png_plan(body: bytes | bytearray, max_pixels: int = MAX_PIXELS) -> tuple[int, int, int]:
    """``(height, width, channels)`` that `decode_png` will give for ``body``, from its header alone
    (grey, palette and grey+alpha decode to 1 channel, RGB and RGBA to 3); 400/413 on ``body`` as
    `decode_png`. Cost O(1): nothing is decoded."""
    width, height, _, channels = png_header(body)
    check_pixels(height, width, max_pixels)
    return height, width, 1 if channels <= 2 else 3


def check_pixels(height: int, width: int, limit: int, field: str = "body", what: str = "image") -> None:
    """413 on ``field`` if a ``height`` x ``width`` image has more than ``limit`` pixels."""
    if width * height > limit:
        raise ApiError(413, "too_large", f"{what} of {width}x{height} = {width * height} pixels is over the limit "
                       f"of {limit} pixels (KPCA_MAX_IMAGE_PIXELS)", field)


def image_patch_plan(image: np.ndarray, n_features: int, upscale: int, model: str) -> PatchPlan:
    """How a decoded ``image`` is cut for model ``model`` over rows of ``n_features`` values, upscaled
    ``upscale`` times (`kpca.images.patches.patch_plan`: patch side, upscaled height and width), or a 422 on
    ``image`` when those rows are not square patches of the image's channels. Cost O(1)."""
    try:
        return patch_plan(image.shape, n_features, upscale)
    except ValueError:
        channels = channels_of(image.shape)
        kind = "grey" if channels == 1 else "colour"
        raise ApiError(422, "invalid", f"model {model!r} was trained on rows of {n_features} values, which are not "
                       f"square {kind} patches ({channels} channel(s)); send an image whose patches match "
                       "its training patches", "image") from None


def decode_png(body: bytes | bytearray, max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """uint8/uint16 array of shape (H, W) (grey) or (H, W, 3) (colour) from PNG bytes.

    The header is checked first (`png_header`; ``max_pixels`` a 413 on
    ``body``), then the image decoded: palette and grey+alpha images become
    grey, RGBA becomes RGB (alpha is dropped). Truncated or unreadable pixel
    data is a 400 on ``body``.
    """
    width, height, _, _ = png_header(body)
    check_pixels(height, width, max_pixels)
    try:
        with Image.open(io.BytesIO(body)) as img:
            if img.format != "PNG" or img.size != (width, height):
                raise _unreadable("Pillow does not read it as the PNG its header declares")
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
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise _unreadable(str(exc)) from None
    if array.shape[:2] != (height, width):
        raise _unreadable(f"decoded {array.shape[1]}x{array.shape[0]} pixels, the header declares {width}x{height}")
    return np.ascontiguousarray(array)


def encode_png(array: np.ndarray) -> bytes:
    """PNG bytes of a uint8 or uint16 image of shape (H, W) or (H, W, 3)."""
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()


#: what an image request's choice holds that its ``X-KPCA-Chosen`` header leaves out: the estimated risk of every
#: second stage tried (about 1 KB), kept in the image job's record (``job=NAME``: ``GET /v1/image-jobs/NAME``)
DETAILS_NOT_IN_HEADER = ("second_stage_risks",)


def chosen_headers(info: dict) -> dict:
    """Response headers that say what an image request chose and how long each step took:
    ``X-KPCA-Chosen`` (compact JSON: the tuning's choice, the noise level and whether it was estimated; the
    details of `DETAILS_NOT_IN_HEADER` are in the job's record) and ``Server-Timing`` (one
    ``step;dur=milliseconds`` entry per step, the standard header)."""
    chosen = {"tune": info.get("tune"), **{key: value for key, value in (info.get("chosen") or {}).items()
                                           if key not in DETAILS_NOT_IN_HEADER}}
    for key in ("noise", "noise_estimated", "candidates"):
        if key in info:
            chosen[key] = info[key]
    timing = ", ".join(f"{s['step']};dur={1000.0 * s['seconds']:.1f}" for s in info.get("steps", []))
    headers = {"X-KPCA-Chosen": json.dumps(chosen, separators=(",", ":"), default=float)}
    if timing:
        headers["Server-Timing"] = timing
    return headers
