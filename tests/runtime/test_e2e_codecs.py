"""Pluggable serialization (issue 26 item 1) on the in-memory World and on LocalAWS (moto): a codec of the user's
on a step's result, a workflow's result (``run.result()`` and a parent awaiting it as a child) and a hook's
payloads carries values above the inline limit (16 KB: in S3 on AWS) as its own text or bytes, stored as the
codec envelope and decoded on every replay; without a codec values are stored as before; a codec's failure is
a ``CodecError`` naming the value's place, never retried: a step's result fails the step, a workflow's result
fails the run (``SERIALIZATION_ERROR``), a hook payload fails only the await that takes it."""

from __future__ import annotations

import uuid
import zlib
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

from awsworld import (
    CodecError,
    Place,
    PydanticCodec,
    StepError,
    WorkflowRunFailedError,
    create_hook,
    sleep,
    step,
    workflow,
)
from awsworld.aws.resources import run_prefix
from awsworld.client.replay import replay_run
from awsworld.durable import serde

from .conftest import AWS, BOTH, E2E
from .values_support import INLINE

pytestmark = pytest.mark.parametrize("e2e_backend", BOTH)

CALLS: Counter[str] = Counter()
PLACES: list[str] = []


@dataclass(frozen=True)
class Ledger:
    """A value awsworld's JSON could store too; the codec stores it as its own line format instead."""

    owner: str
    entries: tuple[tuple[str, Decimal], ...]


class LedgerCodec:
    """Text, one ``name;amount`` line per entry, a header line naming the format and owner."""

    def encode(self, value: Ledger, place: Place, /) -> str:
        PLACES.append(str(place))
        return "\n".join([f"ledger v1 {value.owner}", *(f"{name};{amount}" for name, amount in value.entries)])

    def decode(self, data: str | bytes, place: Place, /) -> Ledger:
        text = data.decode() if isinstance(data, bytes) else data
        head, *lines = text.split("\n")
        if not head.startswith("ledger v1 "):
            raise ValueError(f"not a v1 ledger: {head[:20]!r}")
        pairs = tuple((name, Decimal(amount)) for name, amount in (line.split(";") for line in lines))
        return Ledger(head.removeprefix("ledger v1 "), pairs)


class Compressed:
    """Bytes: the codec's output is binary (stored base64 in the envelope)."""

    def encode(self, value: str, place: Place, /) -> bytes:
        return zlib.compress(value.encode())

    def decode(self, data: str | bytes, place: Place, /) -> str:
        assert isinstance(data, bytes)
        return zlib.decompress(data).decode()


def ledger(owner: str, n: int = 1500) -> Ledger:
    return Ledger(owner, tuple((f"item-{i:05d}", Decimal(f"{i}.{i % 100:02d}")) for i in range(n)))


LEDGERS = LedgerCodec()


@step(name="e2e_codecs.build", codec=LEDGERS)
async def build(owner: str) -> Ledger:
    CALLS[owner] += 1
    return ledger(owner)


@step(name="codecs.text", codec=Compressed())
async def text(seed: str) -> str:
    return seed * 5000  # 40 KB or more of text, a few hundred bytes compressed


@workflow(name="codecs.books", codec=LEDGERS)
async def books(owner: str) -> Ledger:
    built = await build(owner)
    long_text = await text("abcdefgh")
    await sleep("1s")  # a new delivery: both results are decoded from the log again
    if built != ledger(owner) or long_text != "abcdefgh" * 5000:
        raise AssertionError("a value changed on its way")
    return built


async def _offloaded(e2e: E2E, run_id: str) -> int:
    s3 = await e2e.world.clients.s3()
    page = await s3.list_objects_v2(Bucket=e2e.world.config.bucket_name, Prefix=f"{run_prefix(run_id)}values/")
    return int(page.get("KeyCount", 0))


async def test_step_and_workflow_results_round_trip_through_their_codecs(e2e: E2E) -> None:
    owner = uuid.uuid4().hex
    run = await e2e.start(books, owner)
    assert await run.result(timeout=60) == ledger(owner)
    assert CALLS[owner] == 1
    events = {e.correlation_id: e for e in await run.events() if e.event_type == "step_completed"}
    stored = events["step_1"].event_data["result"]
    assert stored["$t"] == "codec" and stored["v"].startswith(f"ledger v1 {owner}\n")
    assert len(stored["v"].encode()) > INLINE, "above the inline limit"
    assert set(events["step_2"].event_data["result"]) == {"$t", "b"}, "bytes ride base64"
    assert isinstance(serde.loads(stored), serde.Encoded), "read without its codec: the codec's text as it is"
    view = await e2e.world.runs.get(run.run_id)
    assert view.output["$t"] == "codec"
    assert "the result of step 'e2e_codecs.build' (step_1)" in PLACES
    assert "the result of workflow 'codecs.books'" in PLACES
    if e2e.backend == AWS:
        assert await _offloaded(e2e, run.run_id) >= 2, "the codec's output is offloaded to S3 like any value"
    assert (await replay_run(e2e.world, run.run_id)).ok, "the stored log replays: results decoded, output re-encoded"


@workflow(name="codecs.parent")
async def parent(owner: str) -> dict[str, Any]:
    child_ledger = await books(owner)  # a child run: its result decoded with the child workflow's codec
    return {"owner": child_ledger.owner, "entries": len(child_ledger.entries), "type": type(child_ledger).__name__}


async def test_a_parent_decodes_its_childs_result_with_the_childs_codec(e2e: E2E) -> None:
    owner = uuid.uuid4().hex
    run = await e2e.start(parent, owner)
    assert await run.result(timeout=60) == {"owner": owner, "entries": 1500, "type": "Ledger"}


class Order(BaseModel):
    sku: str
    quantity: int
    note: str


@workflow(name="codecs.orders")
async def orders(token: str) -> dict[str, Any]:
    hook = create_hook(token, codec=PydanticCodec(Order))
    try:
        await hook
        refused = ""
    except CodecError as error:  # the first payload is not an Order: only this await fails
        refused = str(error)
    order = await hook
    await sleep("1s")
    return {"refused": refused, "sku": order.sku, "quantity": order.quantity, "note_length": len(order.note),
            "type": type(order).__name__}


async def test_hook_payloads_are_decoded_by_the_hooks_codec(e2e: E2E) -> None:
    token = f"codecs:{uuid.uuid4().hex}"
    run = await e2e.start(orders, token)
    await e2e.hook_ready(token, run)
    await e2e.client.resume_hook(token, '{"sku": "kettle"}')
    note = "n" * (INLINE + 4096)
    await e2e.client.resume_hook(token, Order(sku="kettle", quantity=2, note=note).model_dump_json())
    result = await run.result(timeout=60)
    assert result["refused"].startswith(f"the payload of hook {token!r} (hook_1_{run.run_id}) cannot be decoded "
                                        "by its codec PydanticCodec: ValidationError")
    assert result == {"refused": result["refused"], "sku": "kettle", "quantity": 2, "note_length": len(note),
                      "type": "Order"}


class Refusing:
    def encode(self, value: str, place: Place, /) -> str:
        raise ValueError(f"will not encode {value!r}")

    def decode(self, data: str | bytes, place: Place, /) -> str:
        raise AssertionError("never reached")


@step(name="codecs.refused", codec=Refusing())
async def refused(tag: str) -> str:
    CALLS[tag] += 1
    return tag


@workflow(name="codecs.refusal")
async def refusal(tag: str) -> dict[str, Any]:
    try:
        await refused(tag)
    except CodecError as error:
        assert isinstance(error, StepError)
        return {"type": error.error_type, "message": error.message, "attempt": error.attempt}
    return {}


async def test_a_codec_that_fails_fails_the_step_once_naming_the_place(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(refusal, tag)
    result = await run.result(timeout=60)
    assert result["type"] == "CodecError" and CALLS[tag] == 1, "never retried"
    assert result["message"] == (f"the result of step 'codecs.refused' (step_1) cannot be encoded by its codec "
                                 f"Refusing: ValueError: will not encode {tag!r}")


@workflow(name="codecs.bad_result", codec=Refusing())
async def bad_result(tag: str) -> str:
    return tag


async def test_a_workflow_result_its_codec_refuses_fails_the_run(e2e: E2E) -> None:
    run = await e2e.start(bad_result, "x")
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=60)
    assert failed.value.code == "SERIALIZATION_ERROR" and failed.value.error_type == "CodecError"
    assert "the result of workflow 'codecs.bad_result' cannot be encoded by its codec Refusing" in str(failed.value)
