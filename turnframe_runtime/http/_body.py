"""A request body read within `HttpLimits`: declared as JSON before a byte is read, its size
counted while it arrives, its nesting measured by a scan over its bytes before any parser sees
it (a parser that recurses meets no body deeper than the limit), then parsed as JSON."""

from __future__ import annotations

import json
import re
from typing import Any, Final

from starlette.requests import Request

from turnframe_runtime.http._options import HttpLimits
from turnframe_runtime.http.errors import BodyTooDeep, BodyTooLarge, MalformedRequest

__all__ = ["JSON_MEDIA_TYPE", "exceeds_depth", "read_body", "read_json"]

JSON_MEDIA_TYPE: Final = "application/json"
#: the bytes that can open, close or hide a bracket: quotes, escapes and brackets
_STRUCTURE: Final = re.compile(rb'["\\\[\]{}]')


def exceeds_depth(data: bytes, max_depth: int) -> bool:
    """Whether `data` nests arrays and objects deeper than `max_depth`, brackets inside JSON
    strings not counted. One pass, no recursion; it judges nesting only (the parser judges the
    rest)."""
    depth = 0
    in_string = False
    escaped_at = -1  # the index a backslash escaped
    for match in _STRUCTURE.finditer(data):
        at = match.start()
        if at == escaped_at:
            continue
        char = data[at]
        if in_string:
            if char == 0x5C:  # backslash: the next byte is escaped
                escaped_at = at + 1
            elif char == 0x22:
                in_string = False
            continue
        if char == 0x22:
            in_string = True
        elif char in (0x5B, 0x7B):
            depth += 1
            if depth > max_depth:
                return True
        elif char in (0x5D, 0x7D):
            depth -= 1
    return False


async def read_body(request: Request, limits: HttpLimits) -> bytes:
    """The whole body, or `BodyTooLarge` as soon as it is known to pass the limit (a declared
    length is believed only when it is too large; the bytes are counted as they come)."""
    declared = request.headers.get("content-length")
    if (
        declared is not None
        and declared.isascii()
        and declared.isdigit()
        and int(declared) > limits.max_body_bytes
    ):
        raise BodyTooLarge(f"the body is limited to {limits.max_body_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise BodyTooLarge(f"the body is limited to {limits.max_body_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _declares_json(request: Request) -> bool:
    media_type = request.headers.get("content-type", "").split(";", 1)[0]
    return media_type.strip().lower() == JSON_MEDIA_TYPE


async def read_json(request: Request, limits: HttpLimits) -> Any:
    """The body parsed as JSON within `limits`: `MalformedRequest` unless it is declared
    `application/json` (parameters such as `charset` aside), judged before a byte is read: a
    page on another site can post a form (`text/plain`, form-encoded, multipart) with the user's
    cookies and no preflight, never JSON. Then `BodyTooLarge`, `BodyTooDeep`, or
    `MalformedRequest` for bytes that are not one JSON value in UTF-8."""
    if not _declares_json(request):
        raise MalformedRequest(f"the body is sent as {JSON_MEDIA_TYPE}")
    data = await read_body(request, limits)
    if exceeds_depth(data, limits.max_depth):
        raise BodyTooDeep(f"the body nests at most {limits.max_depth} arrays or objects deep")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError):
        raise MalformedRequest("the body is not JSON") from None
