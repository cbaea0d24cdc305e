"""The largest user value a World takes, the same on every World: ``AWSWORLD_MAX_VALUE_BYTES``.

A value (a run's input or output, a step's input or result, hook metadata or a payload, a queue payload, a
stream chunk with its 4-byte frame) is measured as the UTF-8 bytes of its compact JSON (a chunk: its bytes).
The AWS World keeps a large value in S3, so its bound is a choice, not DynamoDB's 400 KB; the in-memory World
applies the same bound, so a value a test passes is one the deployed stack takes, and a value it refuses is
refused there too, with the same ``PayloadTooLargeError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..settings import DEFAULT_MAX_VALUE_BYTES as DEFAULT_MAX_VALUE_BYTES  # re-exported
from ..settings import SETTINGS, Settings
from .errors import InvalidInputError, PayloadTooLargeError

MAX_VALUE_BYTES_ENV = Settings.max_value_bytes.env


def max_value_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The bound this process is configured with (``AWSWORLD_MAX_VALUE_BYTES``, default 64 MiB; ``ValueError``
    for a value that is not a positive number of bytes)."""
    return (SETTINGS if environ is None else Settings(environ)).max_value_bytes


# json.dumps with any option set builds a new encoder per call: this one is built once (same output, same errors).
_STRICT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def value_json(value: Any, field: str) -> str:
    """``value``'s compact JSON, or the 400 naming ``field`` when it is not a JSON value (NaN, an object)."""
    try:
        return _STRICT.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInputError(f"{field} is not JSON-serializable: {exc}", field=field) from None


def size_text(message: str | None) -> str:
    """A size refusal's message (``encode_value``) without the wire field it starts with: ``eventData.input is
    300025 bytes of JSON; the largest ...`` -> ``300025 bytes of JSON; the largest ...``. For an error that names
    the value in its user's words (the arguments of a workflow, the input of a step) instead of the field."""
    return re.sub(r"^[A-Za-z_.\[\]0-9]+ is (?=\d+ bytes)", "", message or "")


def too_large_text(what: str, refusal: str | None, *, plural: bool = False) -> str:
    """The one wording of a value the World refused as too large, named in its writer's words (``what``: "the
    arguments of workflow 'x'", "the result of step 'x' (step_3)") with the refusal's size against the bound
    (``size_text``). Every error of a refused value is worded here: a workflow's arguments or return value, a
    step's input, result or error, a hook's payload or metadata, a child's input."""
    return f"{what} {'are' if plural else 'is'} too large to record: {size_text(refusal)}"


_SIZE_SLICE = 1 << 20
"""How much of a non-ASCII text ``utf8_size`` encodes at a time: the copy it makes to count."""


def utf8_size(text: str, errors: str = "strict") -> int:
    """The bytes of ``text`` in UTF-8 (``str.encode``'s ``errors``: a lone surrogate raises
    ``UnicodeEncodeError`` unless ``"surrogatepass"``), without a copy of its size: an ASCII text's length is
    its size (known to CPython without a scan), any other is encoded ``_SIZE_SLICE`` characters at a time and
    only counted. So a value over the bound is refused at the cost of its JSON text, not of its bytes too."""
    if text.isascii():
        return len(text)
    return sum(len(text[at:at + _SIZE_SLICE].encode("utf-8", errors)) for at in range(0, len(text), _SIZE_SLICE))


def _too_large(field: str, size: int, max_bytes: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"{field} is {size} bytes of JSON; the largest value awsworld stores is "
                                f"{max_bytes} bytes ({MAX_VALUE_BYTES_ENV})", field=field)


def _escaped_json(value: Any) -> str:
    """``value``'s compact JSON with every non-ASCII character escaped: for a text with a lone surrogate, which
    UTF-8 cannot hold. Each of its characters is one byte."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def encode_value(value: Any, field: str, max_bytes: int | None) -> tuple[str, bytes]:
    """A user value as every World stores it: its JSON text and UTF-8 bytes (a lone surrogate, which is not
    UTF-8, escaped as JSON's \\uXXXX so it still round-trips exactly), at most ``max_bytes`` of them (None: no
    bound) or ``PayloadTooLargeError``.

    A value over the bound costs its JSON text and no other copy before the error: a text that may be over
    (more than a quarter of the bound in characters, as a character is at most 4 bytes of UTF-8) is sized
    before its bytes are made (``utf8_size``), and every text is let go before the raise, since a traceback
    keeps this frame alive while its caller handles the error (a step's refused result is recorded as the
    step's failure from within the handler: ``_worker/step_runner.py``). A value within a quarter of the bound
    costs what it always did: one encode and one ``len``. ``bench/oversized_values.py`` measures it."""
    text = value_json(value, field)
    if max_bytes is not None and len(text) > max_bytes // 4:
        try:
            size = utf8_size(text)
        except UnicodeEncodeError:
            text = _escaped_json(value)
            size = len(text)
        if size > max_bytes:
            del text
            raise _too_large(field, size, max_bytes)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        text = _escaped_json(value)
        data = text.encode("ascii")
    if max_bytes is not None and len(data) > max_bytes:  # a short text escaped: 6 or 12 bytes for a character
        size = len(data)
        del text, data
        raise _too_large(field, size, max_bytes)
    return text, data
