"""The codec a user attaches to a value's place: ``@step(codec=...)``, ``@workflow(codec=...)``,
``create_hook(codec=...)``. It turns a value into ``str`` or ``bytes`` and back.

Close to the Lambda durable SDK's ``SerDes`` (``serialize(value, context) -> str``, ``deserialize(data,
context)``) and to pydantic's ``TypeAdapter``: the type is the codec's own (a ``Codec[Order]`` decodes to an
``Order``), so a step declared with one keeps its return type for the checker, and the codec needs no type
argument at each call. ``Place`` is the SDK's context: where the value sits. The engine's ``codecs`` stores
what a codec returns (see there); without a codec a value is stored as it always was.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pydantic import TypeAdapter

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
