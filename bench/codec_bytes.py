"""Bytes the log stores for one value with and without a codec (``docs/how-to/codecs.md``).

The value is what a shop's step passes around: N orders (pydantic models with a ``Decimal`` price, a
``datetime`` and a note). Stored three ways, each exactly as the World is handed it (``durable.codecs.store``:
the JSON text whose UTF-8 bytes count against the inline limit, 16 KiB, and ``AWSWORLD_MAX_VALUE_BYTES``):
awsworld's JSON with typed envelopes (no codec), ``PydanticCodec(list[Order])`` (plain JSON, validated on the way
back), and a codec that zlib-compresses the pydantic JSON (bytes: base64 in the envelope). Each is decoded back
and compared, so a figure is never for a value that does not round-trip.

Run: ``python bench/codec_bytes.py [N ...]`` (default 10 100 1000).
"""

from __future__ import annotations

import sys
import zlib
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

from awsworld import Codec, Place, PydanticCodec
from awsworld.durable import codecs, serde

INLINE = 16 * 1024


class Order(BaseModel):
    sku: str
    quantity: int
    price: Decimal
    placed: datetime
    note: str


class Zipped:
    """``PydanticCodec``'s JSON, zlib-compressed: bytes."""

    def __init__(self, inner: PydanticCodec[list[Order]]) -> None:
        self.inner = inner

    def encode(self, value: list[Order], place: Place, /) -> bytes:
        return zlib.compress(self.inner.encode(value, place).encode("utf-8"), 6)

    def decode(self, data: str | bytes, place: Place, /) -> list[Order]:
        assert isinstance(data, bytes)
        return self.inner.decode(zlib.decompress(data), place)


def orders(n: int) -> list[Order]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return [Order(sku=f"sku-{i % 37:03d}", quantity=1 + i % 5, price=Decimal(f"{i % 90 + 9}.99"),
                  placed=start + timedelta(minutes=i), note="gift wrap" if i % 3 == 0 else "") for i in range(n)]


def stored_bytes(value: list[Order], codec: Codec[list[Order]] | None) -> int:
    place = Place("result", "step 'bench.orders'")
    stored = codecs.store(value, codec, place)
    back: Any = codecs.load(stored, codec, place)
    if back != value:
        raise AssertionError(f"{type(codec).__name__} did not round-trip")
    return len(serde.to_json_text(stored).encode("utf-8"))


def main(sizes: list[int]) -> None:
    plain = PydanticCodec(list[Order])
    ways: list[tuple[str, Codec[list[Order]] | None]] = [
        ("no codec (serde envelopes)", None), ("PydanticCodec(list[Order])", plain),
        ("zlib(PydanticCodec)", Zipped(plain))]
    print(f"{'orders':>7}  " + "  ".join(f"{name:>28}" for name, _ in ways))
    for n in sizes:
        value = orders(n)
        figures = [stored_bytes(value, codec) for _, codec in ways]
        cells = [f"{b:>9,d} B{' (S3)' if b > INLINE else '     '}" for b in figures]
        print(f"{n:>7}  " + "  ".join(f"{cell:>28}" for cell in cells))
    print(f"(S3: above the {INLINE:,d}-byte inline limit, so stored out of line)")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [10, 100, 1000])
