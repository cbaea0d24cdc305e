"""The Workflow SDK TypeScript runtime's serialized values, read for people: what awsworld shows of a run of that
runtime (its error in ``awsworld describe``, ``runs``, ``events`` and the UI; its output in ``awsworld result``).

That runtime stores every value as bytes it reads itself: a 4-byte format tag, then its encoding. ``devl`` is
devalue's flat JSON (``[root, ...]``: each array, object and reduced value refers to the others by index), ``gzip``
is the same compressed (the runtime compresses values above a size). awsworld stores those bytes as they come and
never writes them back, so reading them here changes nothing: a form this module does not know (``encr``, ``zstd``,
a reducer of the app's own) is left unread, and the caller shows the bytes' size as before.

Reduced values (devalue's ``[name, index]``: the runtime's ``Error`` and its subclasses, ``Uint8Array``, ...) read
as ``{"$type": name, **fields}``; an error as ``{"$type": "FatalError", "message": ..., "stack": ...}`` (the
runtime writes ``name`` only when it differs from the class). Dates read as ISO strings, sets and maps as lists.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from typing import Any, cast

DEVALUE_TAG = b"devl"
GZIP_TAG = b"gzip"

MAX_READ_BYTES = 16 * 1024 * 1024
"""A compressed value is read for people only up to this size once decompressed (a view, not a copy of a run's
data: a bigger one is left unread)."""

# devalue's negative indices: values a flat array cannot hold as themselves
_SPECIAL: dict[int, Any] = {-1: None, -2: None, -3: float("nan"), -4: float("inf"), -5: float("-inf"), -6: -0.0}


class UnreadableError(ValueError):
    """Bytes this module does not read (an unknown tag, encrypted, malformed): the caller shows them unread."""


def read_sdk_bytes(raw: bytes) -> Any:
    """The value the runtime serialized into ``raw``, as JSON-like Python (see the module's docstring); raises
    ``UnreadableError`` for a form it does not read."""
    if raw.startswith(GZIP_TAG):
        try:
            inflater = zlib.decompressobj(wbits=31)  # gzip's header
            raw = inflater.decompress(raw[len(GZIP_TAG):], MAX_READ_BYTES)
        except (zlib.error, gzip.BadGzipFile) as error:
            raise UnreadableError(f"not gzip: {error}") from None
        if inflater.unconsumed_tail:
            raise UnreadableError(f"larger than {MAX_READ_BYTES} bytes decompressed")
    if not raw.startswith(DEVALUE_TAG):
        raise UnreadableError(f"format {raw[:4]!r} is not read here")
    try:
        flat = json.loads(raw[len(DEVALUE_TAG):])
    except ValueError as error:
        raise UnreadableError(f"not devalue's JSON: {error}") from None
    return unflatten(flat)


def unflatten(flat: Any) -> Any:
    """devalue's flat array as the value it holds (its ``unflatten``, for the JSON-like reading above)."""
    if isinstance(flat, int) and not isinstance(flat, bool):
        return _SPECIAL.get(flat)
    if not isinstance(flat, list) or not flat:
        raise UnreadableError("not a devalue array")
    items = cast(list[Any], flat)
    cache: dict[int, Any] = {}

    def at(index: Any) -> Any:
        if not isinstance(index, int) or isinstance(index, bool):
            raise UnreadableError(f"not an index: {index!r}")
        if index < 0:
            return _SPECIAL.get(index)
        if index >= len(items):
            raise UnreadableError(f"index {index} out of range")
        if index in cache:
            return cache[index]
        cache[index] = None  # a cycle reads as null, not forever
        cache[index] = value = read(items[index])
        return value

    def read(item: Any) -> Any:
        if isinstance(item, dict):
            return {str(key): at(index) for key, index in cast(dict[Any, Any], item).items()}
        if not isinstance(item, list):
            return item
        parts = cast(list[Any], item)
        if not parts or not isinstance(parts[0], str):
            return [at(index) for index in parts]
        kind, rest = str(parts[0]), parts[1:]  # a typed value: devalue's own, or a reducer's [name, index]
        if kind == "Date" and rest:
            return rest[0]
        if kind in ("Set", "Map"):
            return [at(index) for index in rest]
        if kind in ("BigInt", "RegExp") and rest:
            return str(rest[0])
        if kind == "Object" and rest:
            return rest[0]
        if kind == "null":
            return {str(rest[i]): at(rest[i + 1]) for i in range(0, len(rest) - 1, 2)}
        if len(rest) == 1:
            inner = at(rest[0])
            if isinstance(inner, dict):
                return {"$type": kind, **cast(dict[str, Any], inner)}
            return {"$type": kind, "value": inner}
        raise UnreadableError(f"typed value {kind!r} not read here")

    return at(0)


def readable_value(value: Any) -> Any:
    """A value of a run of the TypeScript runtime as a person reads it: its bytes (``{"__type": "Uint8Array",
    "data": base64}``, as every World stores them) read by ``read_sdk_bytes``; the value as it is when it is not
    such bytes or they are not read (``awsworld result`` and ``events`` printed the base64 of the runtime's
    compressed bytes)."""
    if not isinstance(value, dict):
        return value
    tagged = cast(dict[str, Any], value)
    data = tagged.get("data")
    if tagged.get("__type") != "Uint8Array" or not isinstance(data, str):
        return tagged
    try:
        return read_sdk_bytes(base64.b64decode(data, validate=True))
    except (UnreadableError, ValueError, RecursionError):
        return tagged


def sdk_error_fields(value: Any) -> dict[str, Any] | None:
    """An error as the runtime reduced it (``read_sdk_bytes``'s ``{"$type": "FatalError", ...}``) as awsworld's
    error fields: ``name`` (its ``name``, else its class), ``message`` and ``stack``; None for a value that is no
    error. (Its ``cause`` is left out: the runtime's failure of a step that ran out of retries already names the
    step and the original message, and its stack is the original's.)"""
    if not isinstance(value, dict):
        return None
    error = cast(dict[str, Any], value)
    kind, message, name, stack = error.get("$type"), error.get("message"), error.get("name"), error.get("stack")
    if not isinstance(kind, str) or not isinstance(message, str):
        return None
    fields: dict[str, Any] = {"name": name if isinstance(name, str) and name else kind, "message": message}
    if isinstance(stack, str):
        fields["stack"] = stack
    return fields


__all__ = ["DEVALUE_TAG", "GZIP_TAG", "UnreadableError", "read_sdk_bytes", "readable_value", "sdk_error_fields",
           "unflatten"]
