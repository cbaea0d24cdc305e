"""A user's codec and the values stored through it: the codec a user attaches to a value's place
(``@step(codec=...)``, ``@workflow(codec=...)``, ``create_hook(codec=...)``) turns a value into ``str`` or ``bytes``
and back, and this module puts that into the log and takes it out again.

``Codec`` is close to the Lambda durable SDK's ``SerDes`` (``serialize(value, context) -> str``,
``deserialize(data, context)``) and to pydantic's ``TypeAdapter``: the type is the codec's own (a ``Codec[Order]``
decodes to an ``Order``), so a step declared with one keeps its return type for the checker, and the codec needs
no type argument at each call. ``Place`` is the SDK's context: where the value sits.

Without a codec a value is stored as it always was (``serde``'s JSON with typed envelopes); with one it is
stored as the envelope ``{"$t": "codec", "v": text}`` (``"b"``: base64 of bytes), which the World then stores
like any value: inline, or in S3 past ``AWSWORLD_INLINE_VALUE_LIMIT``, encrypted when payloads are, measured
against ``AWSWORLD_MAX_VALUE_BYTES``.

``store(value, codec, place)`` and ``load(stored, codec, place)`` are the one pair every value's path calls (a
step's result, a workflow's result, a child's result as its parent reads it, a poll's state), ``decode_payload``
a hook's, and ``store_call``/``load_call`` a call's arguments (``args_codec``: a step's, a workflow's or a
child's input): ``codec=None`` is today's envelopes.

A call's arguments go through an ``args_codec`` as ONE value, the tuple of the function's parameters in order
(keyword arguments bound to theirs, defaults filled in: ``inspect.Signature.bind``), so a
``PydanticCodec(tuple[Order, int])`` types and validates them all; the stored input is then the codec envelope
itself rather than ``{"args": [...], "kwargs": {...}}``. A function with keyword-only or ``**kwargs``
parameters cannot take one (``check_positional``, at decoration). A codec's
failure raises ``CodecError``, a ``FatalError`` (the same value fails the same way: never retried) whose message
names the value's place (``the result of step 'shop.quote' (step_2)``). A value stored with a codec and read
where none is given (the CLI, the UI, an export) reads as ``serde.Encoded``: its text, shown as it is.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pydantic import TypeAdapter

from ..authoring.errors import CodecError
from . import json_data, serde
from .serde import Encoded

T = TypeVar("T")


@dataclass(frozen=True)
class Place:
    """Where a value sits, for a codec that wants to know (per-run keys, say) and for the error that names it:
    ``what`` (``"result"``), ``of`` (``"step 'shop.quote'"``), and the run and operation ids when known."""

    what: str
    of: str
    run_id: str | None = None
    op_id: str | None = None

    def __str__(self) -> str:
        return f"the {self.what} of {self.of}" + (f" ({self.op_id})" if self.op_id else "")


class Codec(Protocol[T]):
    """Turns a value of type ``T`` into ``str`` or ``bytes`` and back. ``place`` says where the value sits;
    most codecs ignore it. Raise anything on a value you cannot handle: it becomes a ``CodecError`` naming the
    place, never retried. Must be deterministic in ``decode`` (replays decode the same data again)."""

    def encode(self, value: T, place: Place, /) -> str | bytes: ...

    def decode(self, data: str | bytes, place: Place, /) -> T: ...


class PydanticCodec(Generic[T]):
    """A codec from a pydantic ``TypeAdapter``: JSON of any type pydantic validates (models, dataclasses,
    ``list[Order]``, ``dict[str, Decimal]``...): ``PydanticCodec(Order)``. Validated both ways, in pydantic's
    default (lax) mode: on the way out, so a value that does not fit is refused where it is made (an
    ``args_codec``'s arguments at ``Client.start`` or at a child call, nothing written) rather than where it is
    read back, and what is stored is the validated value, which is what decoding it gives."""

    def __init__(self, kind: type[T]) -> None:
        self._adapter: TypeAdapter[T] = TypeAdapter(kind)
        self.kind = kind

    def encode(self, value: T, place: Place, /) -> str:
        # Text, not pydantic's bytes: stored as the envelope's "v" (readable in the CLI and the UI, its quotes
        # escaped) rather than base64 of the bytes, a third larger (bench/codec_bytes.py).
        return self._adapter.dump_json(self._adapter.validate_python(value)).decode("utf-8")

    def decode(self, data: str | bytes, place: Place, /) -> T:
        return self._adapter.validate_json(data)


def check_positional(fn: Callable[..., Any], what: str) -> None:
    """Refuse an ``args_codec`` for ``fn`` when its arguments cannot all travel as one tuple (``TypeError``)."""
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (parameter.KEYWORD_ONLY, parameter.VAR_KEYWORD):
            raise TypeError(f"{what} {getattr(fn, '__qualname__', fn)!r} has the keyword-only parameter "
                            f"{parameter.name!r}: an args_codec encodes the arguments as one tuple, so every "
                            f"parameter must be positional")


PlaceOf = Place | Callable[[], Place]
"""Where a value sits, or how to say it when asked: a value without a codec never needs its place, so a hot path
passes a callable and only a codec (or a codec's error) builds the ``Place`` (and its text)."""


def _at(place: PlaceOf) -> Place:
    return place if isinstance(place, Place) else place()


def store(value: T, codec: Codec[T] | None, place: PlaceOf) -> json_data.JSONValue:
    """``value`` as the log stores it: ``serde.dumps(value)`` without a codec, the codec's envelope with one."""
    if codec is None:
        return serde.dumps(value)
    place = _at(place)
    try:
        data = codec.encode(value, place)
    except Exception as error:
        raise _failed("encoded", codec, place, error) from error
    # (its type says str or bytes, but a user's codec may return anything: the checker takes the type's word)
    if not isinstance(data, str | bytes | bytearray):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise CodecError(f"{place}: its codec {_name(codec)} returned {type(data).__name__}, not str or bytes",
                         place=str(place))
    return serde.dumps(Encoded(data if isinstance(data, str) else bytes(data)))


def load(stored: object, codec: Codec[T] | None, place: PlaceOf) -> T:
    """The value ``store`` was given. A value stored without a codec (recorded before the codec was added) is
    read as it was stored; one stored with a codec and read without one is an ``Encoded``."""
    value: Any = serde.loads(stored)
    if codec is None or not isinstance(value, Encoded):
        return value  # (serde's values are untyped; a codec's are its type)
    return _decode(value.data, codec, _at(place))


def load_text(stored: Any, codec: Codec[T], place: PlaceOf) -> T:
    """``stored`` through ``codec`` whatever stored it: a codec's text as it is, a value stored without one as
    awsworld's JSON text of it (``child_options(codec=...)`` reading a child workflow that has no codec)."""
    value: Any = serde.loads(stored)
    data = value.data if isinstance(value, Encoded) else json.dumps(stored, ensure_ascii=False)
    return _decode(data, codec, _at(place))


def decode_payload(payload: object, codec: Codec[T], place: PlaceOf) -> T:
    """A hook's payload (already read from the log) through the hook's codec: the sender sent the encoded text
    or bytes (``resume_hook(token, text)``, a webhook's body), the workflow gets the decoded value."""
    place = _at(place)
    data = payload.data if isinstance(payload, Encoded) else payload
    if not isinstance(data, str | bytes):
        raise CodecError(f"{place} must be str or bytes for its codec {_name(codec)} to decode, got "
                         f"{type(data).__name__}", place=str(place))
    return _decode(data, codec, place)


def undecodable_payload(stored: object) -> str | None:
    """What keeps a hook payload as ``serde.dumps`` stores it from reaching a codec (``decode_payload`` takes only
    text or bytes): the type it holds instead (``"dict"``), or None when a codec can take it. ``resume_hook``
    asks before it records a payload for a codec hook."""
    payload = serde.loads(stored)
    data = payload.data if isinstance(payload, Encoded) else payload
    return None if isinstance(data, str | bytes) else type(data).__name__


def store_call(args: tuple[Any, ...], kwargs: dict[str, Any], codec: Codec[Any] | None, fn: Callable[..., Any],
               place: PlaceOf) -> Any:
    """A call's arguments as the log stores them: ``{"args", "kwargs"}`` without a codec (``SerializationError``
    for a value serde cannot hold), else the codec's envelope of the bound tuple (``CodecError``; a
    ``TypeError`` for arguments that do not fit ``fn``)."""
    if codec is None:
        return serde.dumps({"args": list(args), "kwargs": kwargs})
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return store(tuple(bound.args), codec, place)


def load_call(stored: Any, codec: Codec[Any] | None, place: PlaceOf,
              fn: Callable[..., Any] | None = None) -> json_data.Call:
    """The arguments ``store_call`` stored. Ones stored without the codec (by a starter that did not know the
    workflow: another language over HTTP, ``Client.start("name", ...)`` without its code; or before the codec was
    added) go through it here, bound to ``fn``'s parameters as ``store_call`` binds them, so the body gets the
    codec's types (a ``PydanticCodec`` validates JSON into models) and what the codec refuses, or what does not
    bind, is a ``CodecError`` naming the place: the same on every replay, as decoding is deterministic."""
    value = serde.loads(stored) if stored is not None else None
    if isinstance(value, Encoded):
        place = _at(place)
        if codec is None:
            raise CodecError(f"{place} were stored by an args_codec, and there is none to decode them now",
                             place=str(place))
        decoded: object = _decode(value.data, codec, place)
        if not json_data.is_sequence(decoded):
            raise CodecError(f"{place}: its codec {_name(codec)} decoded {type(decoded).__name__}, not the tuple "
                             f"of arguments", place=str(place))
        return json_data.Call(list(decoded), {})  # (a tuple's items are the codec's types)
    call = json_data.as_call(value)
    if codec is None or fn is None or stored is None:
        return call
    try:
        coded = store_call(tuple(call.args), call.kwargs, codec, fn, place)
    except TypeError as error:  # they do not bind to the parameters the codec's tuple is of
        place = _at(place)
        raise CodecError(f"{place} were stored without its codec {_name(codec)} and do not fit it: {error}",
                         place=str(place)) from error
    return load_call(coded, codec, place)


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
