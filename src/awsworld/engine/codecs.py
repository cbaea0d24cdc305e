"""Pluggable serialization, stored: a user's codec (``authoring.codecs``) turns a value into text or bytes, and
this module puts that into the log and takes it out again.

Without a codec a value is stored as it always was (``serde``'s JSON with typed envelopes); with one it is
stored as the envelope ``{"$t": "codec", "v": text}`` (``"b"``: base64 of bytes), which the World then stores
like any value: inline, or in S3 past ``AWSWORLD_INLINE_VALUE_LIMIT``, encrypted when payloads are, measured
against ``AWSWORLD_MAX_VALUE_BYTES``.

``store(value, codec, place)`` and ``load(stored, codec, place)`` are the one pair every value's path calls (a
step's result, a workflow's result, a child's result as its parent reads it; a map's items or results and a
poll's state call the same two), and ``decode_payload`` a hook's: ``codec=None`` is today's envelopes. A codec's
failure raises ``CodecError``, a ``FatalError`` (the same value fails the same way: never retried) whose message
names the value's place (``the result of step 'shop.quote' (step_2)``). A value stored with a codec and read
where none is given (the CLI, the UI, an export) reads as ``serde.Encoded``: its text, shown as it is.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ..authoring.codecs import Codec, Place
from ..authoring.errors import CodecError
from . import serde
from .serde import Encoded

T = TypeVar("T")


def store(value: T, codec: Codec[T] | None, place: Place) -> serde.JSONValue:
    """``value`` as the log stores it: ``serde.dumps(value)`` without a codec, the codec's envelope with one."""
    if codec is None:
        return serde.dumps(value)
    try:
        data = codec.encode(value, place)
    except Exception as error:
        raise _failed("encoded", codec, place, error) from error
    # (its type says str or bytes, but a user's codec may return anything: the checker takes the type's word)
    if not isinstance(data, str | bytes | bytearray):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise CodecError(f"{place}: its codec {_name(codec)} returned {type(data).__name__}, not str or bytes",
                         place=str(place))
    return serde.dumps(Encoded(data if isinstance(data, str) else bytes(data)))


def load(stored: object, codec: Codec[T] | None, place: Place) -> T:
    """The value ``store`` was given. A value stored without a codec (recorded before the codec was added) is
    read as it was stored; one stored with a codec and read without one is an ``Encoded``."""
    value: Any = serde.loads(stored)
    if codec is None or not isinstance(value, Encoded):
        return value  # (serde's values are untyped; a codec's are its type)
    return _decode(value.data, codec, place)


def decode_payload(payload: object, codec: Codec[T], place: Place) -> T:
    """A hook's payload (already read from the log) through the hook's codec: the sender sent the encoded text
    or bytes (``resume_hook(token, text)``, a webhook's body), the workflow gets the decoded value."""
    data = payload.data if isinstance(payload, Encoded) else payload
    if not isinstance(data, str | bytes):
        raise CodecError(f"{place} must be str or bytes for its codec {_name(codec)} to decode, got "
                         f"{type(data).__name__}", place=str(place))
    return _decode(data, codec, place)


def _decode(data: str | bytes, codec: Codec[T], place: Place) -> T:
    try:
        return codec.decode(data, place)
    except Exception as error:
        raise _failed("decoded", codec, place, error) from error


def _failed(how: str, codec: object, place: Place, error: Exception) -> CodecError:
    return CodecError(f"{place} cannot be {how} by its codec {_name(codec)}: {type(error).__name__}: {error}",
                      place=str(place))


def _name(codec: object) -> str:
    return type(codec).__qualname__
