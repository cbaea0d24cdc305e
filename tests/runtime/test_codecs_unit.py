"""The codec plumbing on its own (``engine.codecs``): what is stored, what reads back with and without the codec,
and the errors that name the value's place (the end-to-end paths are in ``test_e2e_codecs.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from awsworld import CodecError, FatalError, Place, PydanticCodec
from awsworld.engine import codecs, serde

PLACE = Place("result", "step 'shop.quote'", "wrun_1", "step_2")


class Upper:
    def encode(self, value: str, place: Place, /) -> str:
        return value.upper()

    def decode(self, data: str | bytes, place: Place, /) -> str:
        assert isinstance(data, str)
        return data.lower()


class NotText:
    def encode(self, value: str, place: Place, /) -> Any:
        return 42

    def decode(self, data: str | bytes, place: Place, /) -> str:
        return str(data)


def test_a_value_is_stored_as_the_codecs_envelope_and_read_back_with_it() -> None:
    stored = codecs.store("kettle", Upper(), PLACE)
    assert stored == {"$t": "codec", "v": "KETTLE"}
    assert codecs.load(stored, Upper(), PLACE) == "kettle"
    assert codecs.load(stored, None, PLACE) == serde.Encoded("KETTLE"), "without the codec: its text, unchanged"
    assert serde.dumps(serde.loads(stored)) == stored, "and written back as the same envelope"


def test_without_a_codec_nothing_changes() -> None:
    assert codecs.store({"a": (1, 2)}, None, PLACE) == serde.dumps({"a": (1, 2)})
    assert codecs.load(serde.dumps({"a": (1, 2)}), Upper(), PLACE) == {"a": (1, 2)}, "recorded before the codec"


def test_bytes_ride_base64() -> None:
    codec = PydanticCodec(list[int])
    stored = codecs.store([1, 2, 3], codec, PLACE)
    assert set(stored) == {"$t", "b"}
    assert codecs.load(stored, codec, PLACE) == [1, 2, 3]


def test_failures_are_fatal_codec_errors_naming_the_place() -> None:
    with pytest.raises(CodecError, match=r"^the result of step 'shop.quote' \(step_2\): its codec NotText returned "
                                         r"int, not str or bytes$") as error:
        codecs.store("x", NotText(), PLACE)
    assert isinstance(error.value, FatalError) and error.value.place == "the result of step 'shop.quote' (step_2)"
    with pytest.raises(CodecError, match="cannot be decoded by its codec PydanticCodec: ValidationError"):
        codecs.load({"$t": "codec", "v": "[1, 'x']"}, PydanticCodec(list[int]), PLACE)
    with pytest.raises(CodecError, match="must be str or bytes for its codec Upper to decode, got dict"):
        codecs.decode_payload({"sku": "kettle"}, Upper(), Place("payload", "hook 'orders'"))
