"""The codec plumbing on its own (``durable.codecs``): what is stored, what reads back with and without the codec,
and the errors that name the value's place (the end-to-end paths are in ``test_e2e_codecs.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from awsworld import CodecError, FatalError, Place, PydanticCodec
from awsworld.durable import codecs, serde
from awsworld.durable.json_data import Call

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


class Raw:
    def encode(self, value: bytes, place: Place, /) -> bytes:
        return value

    def decode(self, data: str | bytes, place: Place, /) -> bytes:
        assert isinstance(data, bytes)
        return data


def test_bytes_ride_base64_and_pydantic_json_rides_as_text() -> None:
    stored = codecs.store(b"\x00\xff", Raw(), PLACE)
    assert stored == {"$t": "codec", "b": "AP8="}
    assert codecs.load(stored, Raw(), PLACE) == b"\x00\xff"
    codec = PydanticCodec(list[int])
    text = codecs.store([1, 2, 3], codec, PLACE)
    assert text == {"$t": "codec", "v": "[1,2,3]"}, "JSON is text: readable, and no base64 third on top"
    assert codecs.load(text, codec, PLACE) == [1, 2, 3]
    assert codecs.load({"$t": "codec", "b": "WzEsMiwzXQ=="}, codec, PLACE) == [1, 2, 3], "as bytes, stored before"


def test_failures_are_fatal_codec_errors_naming_the_place() -> None:
    with pytest.raises(CodecError, match=r"^the result of step 'shop.quote' \(step_2\): its codec NotText returned "
                                         r"int, not str or bytes$") as error:
        codecs.store("x", NotText(), PLACE)
    assert isinstance(error.value, FatalError) and error.value.place == "the result of step 'shop.quote' (step_2)"
    with pytest.raises(CodecError, match="cannot be decoded by its codec PydanticCodec: ValidationError"):
        codecs.load({"$t": "codec", "v": "[1, 'x']"}, PydanticCodec(list[int]), PLACE)
    with pytest.raises(CodecError, match="must be str or bytes for its codec Upper to decode, got dict"):
        codecs.decode_payload({"sku": "kettle"}, Upper(), Place("payload", "hook 'orders'"))


ARGS = Place("arguments", "step 'shop.quote'", "wrun_1", "step_2")
PAIR = PydanticCodec(tuple[str, int])


async def _quote(sku: str, quantity: int = 1) -> str:
    return sku


def test_a_calls_arguments_are_bound_to_one_tuple_and_read_back_as_positional_arguments() -> None:
    stored = codecs.store_call(("kettle",), {"quantity": 3}, PAIR, _quote, ARGS)
    assert stored == {"$t": "codec", "v": '["kettle",3]'}, "keyword bound to its position"
    assert codecs.store_call(("kettle",), {}, PAIR, _quote, ARGS) == {"$t": "codec", "v": '["kettle",1]'}, \
        "defaults filled in"
    assert codecs.load_call(stored, PAIR, ARGS) == Call(["kettle", 3], {})
    plain = codecs.store_call(("kettle",), {"quantity": 3}, None, _quote, ARGS)
    assert codecs.load_call(plain, PAIR, ARGS) == Call(["kettle"], {"quantity": 3}), "stored without it: as stored"
    with pytest.raises(TypeError):
        codecs.store_call(("kettle", 1, 2), {}, PAIR, _quote, ARGS)


def test_arguments_that_cannot_be_read_back_name_their_place() -> None:
    stored = codecs.store_call(("kettle", 3), {}, PAIR, _quote, ARGS)
    with pytest.raises(CodecError, match=r"^the arguments of step 'shop.quote' \(step_2\) were stored by an "
                                         r"args_codec, and there is none to decode them now$"):
        codecs.load_call(stored, None, ARGS)
    with pytest.raises(CodecError, match=r"its codec Upper decoded str, not the tuple of arguments"):
        codecs.load_call({"$t": "codec", "v": "x"}, Upper(), ARGS)  # type: ignore[arg-type]


def test_a_value_stored_without_a_codec_is_read_by_a_calls_codec_as_its_json() -> None:
    order = PydanticCodec(dict[str, int])
    assert codecs.load_text(serde.dumps({"a": 1}), order, PLACE) == {"a": 1}
    assert codecs.load_text(codecs.store({"a": 2}, order, PLACE), order, PLACE) == {"a": 2}
    with pytest.raises(CodecError, match="cannot be decoded by its codec PydanticCodec"):
        codecs.load_text(serde.dumps("text"), order, PLACE)
