"""Codecs at the places issue 26 item 1 left (after ``test_e2e_codecs``: a step's, a workflow's and a hook's
values), on the in-memory World and on LocalAWS (moto): a step's arguments and a workflow's input through
``args_codec`` (``Client.start``'s and a parent's child call), a child call's own result codec
(``child_options(codec=)``), each poll's state (``poll_until(codec=)``) and a map over a codec step (its items
are the step's arguments, its results the step's). Values are above the inline limit (16 KB: S3 on AWS), are
stored as the codec's envelope, decode to the codec's types after a sleep (a new delivery replays the log), and
a codec's failure at each place is a ``CodecError`` naming it, never retried, with the log it leaves intact."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from awsworld import (
    BatchResult,
    CodecError,
    Place,
    PydanticCodec,
    StepError,
    WorkflowRunFailedError,
    child_options,
    poll_until,
    sleep,
    step,
    workflow,
)
from awsworld import map as batch_map
from awsworld.aws.resources import run_prefix
from awsworld.client.replay import replay_run
from awsworld.durable import serde
from awsworld.world.errors import RunNotFoundError

from .conftest import AWS, BOTH, E2E, on_backends, with_env
from .values_support import INLINE, LIMIT_ENV

CALLS: Counter[str] = Counter()
NOTE = "n" * (INLINE + 2048)
"""Makes one model larger than the inline value limit on its own."""


e2e_backend = on_backends(BOTH)


local_env = with_env(LIMIT_ENV)


class Order(BaseModel):
    sku: str
    quantity: int
    note: str


class Quote(BaseModel):
    sku: str
    total: int
    note: str


ORDER_ARGS = PydanticCodec(tuple[Order, int])
QUOTES = PydanticCodec(Quote)


async def _offloaded(e2e: E2E, run_id: str) -> int:
    s3 = await e2e.world.clients.s3()
    page = await s3.list_objects_v2(Bucket=e2e.world.config.bucket_name, Prefix=f"{run_prefix(run_id)}values/")
    return int(page.get("KeyCount", 0))


def _stored(value: Any) -> Any:
    return serde.loads(value)


# ---------------------------------------------------------------------------------------------- arguments


@step(name="places.quote", codec=QUOTES, args_codec=ORDER_ARGS)
async def quote(order: Order, discount: int = 0) -> Quote:
    if not isinstance(order, Order):
        raise AssertionError(f"the step got {type(order).__name__}, not an Order")
    CALLS[order.sku] += 1
    return Quote(sku=order.sku, total=order.quantity * 10 - discount, note=order.note)


@workflow(name="places.checkout", codec=QUOTES, args_codec=ORDER_ARGS)
async def checkout(order: Order, discount: int) -> Quote:
    if not isinstance(order, Order):
        raise AssertionError(f"the workflow got {type(order).__name__}, not an Order")
    first = await quote(order, discount=discount)
    await sleep("1s")  # a new delivery: the input and the step's result are decoded from the log again
    if first.note != order.note:
        raise AssertionError("the note changed on its way")
    return first


async def test_a_steps_arguments_and_a_workflows_input_go_through_their_args_codecs(e2e: E2E) -> None:
    sku = uuid.uuid4().hex
    order = Order(sku=sku, quantity=3, note=NOTE)
    run = await e2e.start(checkout, order, 5)
    result = await run.result(timeout=60)
    assert isinstance(result, Quote) and result == Quote(sku=sku, total=25, note=NOTE)
    assert CALLS[sku] == 1
    events = await run.events()
    created = events[0].event_data or {}
    stored_input = _stored(created["input"])
    assert isinstance(stored_input, serde.Encoded), "the run's input is the codec's envelope"
    assert stored_input.data == ORDER_ARGS.encode((order, 5), Place("input", "x"))
    assert len(stored_input.data) > INLINE
    step_input = _stored(next(e for e in events if e.event_type == "step_created").event_data["input"])
    assert isinstance(step_input, serde.Encoded), "the step's arguments (keyword bound to its position)"
    assert ORDER_ARGS.decode(step_input.data, Place("arguments", "x")) == (order, 5)
    if e2e.backend == AWS:
        assert await _offloaded(e2e, run.run_id) >= 3, "input, arguments and result are S3 values"
    assert (await replay_run(e2e.world, run.run_id)).ok, "the stored log replays through the codecs"


@step(name="places.first_item")
async def first_item(order: Order, n: int) -> str:
    return order.sku


class BrokenArgs:
    """Encodes; refuses to decode: a step's arguments fail where its body would run, a run's where it starts."""

    def encode(self, value: tuple[Any, ...], place: Place, /) -> str:
        return ORDER_ARGS.encode(value, place)

    def decode(self, data: str | bytes, place: Place, /) -> tuple[Any, ...]:
        raise ValueError("this codec never decodes")


class RefusedArgs:
    def encode(self, value: tuple[Any, ...], place: Place, /) -> str:
        raise ValueError("this codec never encodes")

    def decode(self, data: str | bytes, place: Place, /) -> tuple[Any, ...]:
        raise AssertionError("never reached")


@step(name="places.undecodable", args_codec=BrokenArgs())
async def undecodable(order: Order, n: int) -> str:
    CALLS[f"body:{order.sku}"] += 1
    return order.sku


@step(name="places.unencodable", args_codec=RefusedArgs())
async def unencodable(order: Order, n: int) -> str:
    raise AssertionError("never run")


@workflow(name="places.refusals")
async def refusals(sku: str) -> dict[str, Any]:
    order = Order(sku=sku, quantity=1, note=NOTE)
    out: dict[str, Any] = {}
    try:
        await unencodable(order, 1)
    except CodecError as error:  # raised at the call: nothing recorded for it
        out["encode"] = str(error)
    try:
        await undecodable(order, 1)
    except StepError as error:  # the step failed once, its body never run
        out["decode"] = (error.error_type, error.message, error.attempt)
    await sleep("1s")
    return out


async def test_an_args_codec_that_fails_is_a_codec_error_naming_the_arguments_never_retried(e2e: E2E) -> None:
    sku = uuid.uuid4().hex
    run = await e2e.start(refusals, sku)
    result = await run.result(timeout=60)
    assert result["encode"] == ("the arguments of step 'places.unencodable' (step_1) cannot be encoded by its "
                                "codec RefusedArgs: ValueError: this codec never encodes")
    assert list(result["decode"]) == ["CodecError", "the arguments of step 'places.undecodable' (step_2) cannot be "
                                "decoded by its codec BrokenArgs: ValueError: this codec never decodes", 1]
    assert CALLS[f"body:{sku}"] == 0
    events = await run.events()
    steps = [(e.event_type, e.correlation_id) for e in events if e.event_type.startswith("step_")]
    assert ("step_created", "step_1") not in steps, "the refused call took its position and wrote nothing"
    assert [t for t, c in steps if c == "step_2"] == ["step_created", "step_started", "step_failed"]


@workflow(name="places.bad_input", args_codec=BrokenArgs())
async def bad_input(order: Order, n: int) -> str:
    raise AssertionError("never run")


@workflow(name="places.refused_input", args_codec=RefusedArgs())
async def refused_input(order: Order, n: int) -> str:
    raise AssertionError("never run")


async def test_a_workflow_input_its_codec_refuses(e2e: E2E) -> None:
    order = Order(sku="x", quantity=1, note="short")
    run_id = f"wrun_places_{uuid.uuid4().hex}"
    with pytest.raises(CodecError, match=r"the input of workflow 'places.refused_input' cannot be encoded"):
        await e2e.client.options(run_id=run_id).start(refused_input, order, 1)
    with pytest.raises(RunNotFoundError):
        await e2e.world.runs.get(run_id)  # nothing was recorded
    run = await e2e.start(bad_input, order, 1)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=60)
    assert failed.value.error_type == "CodecError"
    assert "the input of workflow 'places.bad_input' cannot be decoded by its codec BrokenArgs" in str(failed.value)


def test_an_args_codec_needs_positional_parameters() -> None:
    async def keyword_only(order: Order, *, n: int) -> str:
        return ""

    with pytest.raises(TypeError, match="keyword-only parameter 'n'"):
        step(name="places.keyword_only", args_codec=ORDER_ARGS)(keyword_only)


# ---------------------------------------------------------------------------------------------- child calls


@workflow(name="places.legacy")
async def legacy(sku: str, n: int) -> dict[str, Any]:
    """A child without codecs: its result is awsworld's JSON."""
    return {"sku": sku, "total": n, "note": NOTE}


@workflow(name="places.child_quote", codec=QUOTES, args_codec=ORDER_ARGS)
async def child_quote(order: Order, n: int) -> Quote:
    if not isinstance(order, Order):
        raise AssertionError(f"the child got {type(order).__name__}")
    return Quote(sku=order.sku, total=n, note=order.note)


@workflow(name="places.parent")
async def parent(sku: str) -> dict[str, Any]:
    order = Order(sku=sku, quantity=1, note=NOTE)
    typed = await child_options(codec=QUOTES).call(legacy, sku, 7)  # the call's codec reads the JSON
    own = await child_quote(order, 8)  # the child's input through its args_codec, its result through its codec
    await sleep("1s")
    return {"typed": type(typed).__name__, "typed_total": typed.total, "own": type(own).__name__,
            "own_total": own.total, "notes": typed.note == NOTE and own.note == NOTE}


async def test_a_child_call_reads_its_result_with_the_calls_codec_and_sends_its_input_through_the_childs(
        e2e: E2E) -> None:
    run = await e2e.start(parent, uuid.uuid4().hex)
    assert await run.result(timeout=60) == {"typed": "Quote", "typed_total": 7, "own": "Quote", "own_total": 8,
                                            "notes": True}
    child = await e2e.world.runs.get(f"{run.run_id}.step_3")
    child_events = await e2e.client.get_run(child.run_id).events()
    assert isinstance(_stored(child_events[0].event_data["input"]), serde.Encoded)
    assert (await replay_run(e2e.world, run.run_id)).ok


@workflow(name="places.strict_parent")
async def strict_parent(sku: str) -> str:
    try:
        await child_options(codec=PydanticCodec(Order)).call(legacy, sku, 1)
    except CodecError as error:
        return str(error)
    return "decoded"


async def test_a_child_result_the_calls_codec_refuses_raises_codec_error_naming_the_child(e2e: E2E) -> None:
    run = await e2e.start(strict_parent, uuid.uuid4().hex)
    message = await run.result(timeout=60)
    assert message.startswith(f"the result of child run {run.run_id}.step_1 (places.legacy) (hook_2_{run.run_id}) "
                              "cannot be decoded by its codec PydanticCodec: ValidationError")


# ---------------------------------------------------------------------------------------------- poll state


class Progress(BaseModel):
    n: int
    pad: str


SEEN: dict[str, list[str]] = {}


@step(name="places.advance")
async def advance(state: Progress, tag: str) -> Progress:
    SEEN.setdefault(tag, []).append(type(state).__name__)
    return Progress(n=state.n + 1, pad=state.pad)


@workflow(name="places.polling")
async def polling(tag: str) -> dict[str, Any]:
    done = await poll_until(advance, tag, initial_state=Progress(n=0, pad=NOTE), predicate=lambda p: p.n >= 3,
                            interval="1s", backoff=1, codec=PydanticCodec(Progress))
    return {"type": type(done).__name__, "n": done.n, "pad": len(done.pad)}


async def test_each_polls_state_goes_through_the_polls_codec(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(polling, tag)
    assert await run.result(timeout=60) == {"type": "Progress", "n": 3, "pad": len(NOTE)}
    assert SEEN[tag] == ["Progress", "Progress", "Progress"], "every poll's state decoded to the codec's type"
    events = await run.events()
    states = [_stored(e.event_data["error"]["state"]) for e in events if e.event_type == "step_retrying"]
    assert len(states) == 2 and all(isinstance(s, serde.Encoded) and len(s.data) > INLINE for s in states)
    completed = _stored(next(e for e in events if e.event_type == "step_completed").event_data["result"])
    assert isinstance(completed, serde.Encoded), "the accepted poll's result too"
    if e2e.backend == AWS:
        assert await _offloaded(e2e, run.run_id) >= 3
    assert (await replay_run(e2e.world, run.run_id)).ok


class Forgetful:
    """Encodes a state it cannot read back: the second poll's state fails to decode."""

    def encode(self, value: Progress, place: Place, /) -> str:
        return value.model_dump_json()

    def decode(self, data: str | bytes, place: Place, /) -> Progress:
        raise ValueError(f"cannot read {place.what}")


@workflow(name="places.forgetful")
async def forgetful(tag: str) -> str:
    try:
        await poll_until(advance, tag, initial_state=Progress(n=0, pad="x"), predicate=lambda p: p.n >= 3,
                         interval="1s", backoff=1, codec=Forgetful())
    except StepError as error:
        return f"{error.error_type}: {error.message}"
    return "polled"


async def test_a_poll_state_its_codec_refuses_fails_the_wait_once(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(forgetful, tag)
    assert await run.result(timeout=60) == (
        "CodecError: the state of poll_until(step 'places.advance') (step_1) cannot be decoded by its codec "
        "Forgetful: ValueError: cannot read state")
    assert SEEN[tag] == ["Progress"], "the first poll ran; the second could not read its state and was not run"
    kinds = [e.event_type for e in await run.events() if e.event_type.startswith("step_")]
    assert kinds == ["step_created", "step_started", "step_retrying", "step_started", "step_failed"]


# ---------------------------------------------------------------------------------------------- map


@workflow(name="places.mapping")
async def mapping(sku: str) -> dict[str, Any]:
    orders = [Order(sku=f"{sku}-{i}", quantity=i, note=NOTE) for i in range(3)]
    result: BatchResult[Quote] = await batch_map(quote, orders, max_concurrency=3)  # items: the step's arguments
    await sleep("1s")
    quotes = result.values()
    return {"types": sorted({type(q).__name__ for q in quotes}), "totals": [q.total for q in quotes]}


async def test_a_map_over_a_codec_step_stores_items_and_results_through_the_steps_codecs(e2e: E2E) -> None:
    sku = uuid.uuid4().hex
    run = await e2e.start(mapping, sku)
    assert await run.result(timeout=60) == {"types": ["Quote"], "totals": [0, 10, 20]}
    assert [CALLS[f"{sku}-{i}"] for i in range(3)] == [1, 1, 1]
    events = await run.events()
    inputs = [_stored(e.event_data["input"]) for e in events if e.event_type == "step_created"]
    results = [_stored(e.event_data["result"]) for e in events if e.event_type == "step_completed"]
    assert len(inputs) == len(results) == 3
    assert all(isinstance(v, serde.Encoded) and len(v.data) > INLINE for v in inputs + results)
    if e2e.backend == AWS:
        assert await _offloaded(e2e, run.run_id) >= 6
    assert (await replay_run(e2e.world, run.run_id)).ok


class PickyQuotes:
    """Refuses to encode a quote of nothing: one item of a map fails, the others are stored."""

    def encode(self, value: Quote, place: Place, /) -> bytes:
        if value.total == 0:
            raise ValueError("a quote of nothing")
        return QUOTES.encode(value, place)

    def decode(self, data: str | bytes, place: Place, /) -> Quote:
        return QUOTES.decode(data, place)


@step(name="places.picky_quote", codec=PickyQuotes(), args_codec=ORDER_ARGS)
async def picky_quote(order: Order, discount: int = 0) -> Quote:
    CALLS[order.sku] += 1
    return Quote(sku=order.sku, total=order.quantity * 10, note=order.note)


@workflow(name="places.picky_mapping")
async def picky_mapping(sku: str) -> dict[str, Any]:
    orders = [Order(sku=f"{sku}-{i}", quantity=i, note=NOTE) for i in range(3)]
    result = await batch_map(picky_quote, orders, tolerated_failures=1)
    await sleep("1s")
    return {"ok": result.ok, "totals": [item.value.total for item in result.items if item.value is not None],
            "errors": [f"{type(item.error).__name__}: {item.error}" for item in result.items if item.failed]}


async def test_a_map_item_whose_result_its_codec_refuses_fails_alone_never_retried(e2e: E2E) -> None:
    sku = uuid.uuid4().hex
    run = await e2e.start(picky_mapping, sku)
    result = await run.result(timeout=60)
    assert result["ok"] and result["totals"] == [10, 20]
    [error] = result["errors"]
    assert "CodecError" in error and "the result of step 'places.picky_quote' (step_1) cannot be encoded by its " \
        "codec PickyQuotes: ValueError: a quote of nothing" in error, error
    assert [CALLS[f"{sku}-{i}"] for i in range(3)] == [1, 1, 1], "the refused item was not run again"
