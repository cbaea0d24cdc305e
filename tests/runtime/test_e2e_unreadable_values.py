"""A value the log recorded that the code cannot read any more is a divergence, not a delivery that fails forever.

The usual cause: a pydantic model (or dataclass) edited while runs that stored it are in flight, a required field
added, say. Before, the replay's ``SerializationError`` escaped the flow, every delivery failed the same way (a
redelivery loop; on AWS the DLQ), ``run.result()`` waited out its timeout saying the run waited on a sleep, and
``awsworld replay`` stopped with "unexpected SerializationError" instead of reporting the run. Now it is a
``ReplayDivergenceError`` naming the value's place and what to change (``change`` ``"value"``): the run fails with
``CORRUPTED_EVENT_LOG`` where divergences fail runs (``WorkflowTestEnv``), is parked where they park (``awsworld
dev``, a deployed stack: ``tests/cli/test_dev_values.py``), and the replayer reports it. The same for the run's own
input on a replay (before, the body raised before its first call, which read as "the code returned before making
that call", naming no value).

The edit is made as ``awsworld dev``'s reload makes it: the module's name ``Quote`` is bound to the new class.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import pytest
from pydantic import BaseModel

from awsworld import CodecError, Place, WorkflowRunFailedError, create_hook, step, workflow
from awsworld.authoring.errors import CORRUPTED_EVENT_LOG
from awsworld.client.replay import read_run, replay_events
from awsworld.durable import serde
from awsworld.testing import WorkflowTestEnv

NOTE = ("(a class the value names was changed, moved or removed since it was recorded: keep it able to read what "
        "was recorded, say a default for a new field and the old name importable, until the runs recorded with it "
        "end)")


class Quote(BaseModel):
    sku: str
    price: Decimal


class QuoteWithCurrency(BaseModel):  # the edit: a required field added
    sku: str
    price: Decimal
    currency: str


@step(name="unreadable.quote")
async def quote(sku: str) -> Quote:
    return Quote(sku=sku, price=Decimal("9.90"))


@workflow(name="unreadable.priced", pinned=False)
async def priced(sku: str) -> str:
    found = await quote(sku)
    async with create_hook(f"go:{sku}") as hook:
        await hook
    return f"{found.sku} costs {found.price}"


@workflow(name="unreadable.given", pinned=False)
async def given(wanted: Quote) -> str:
    async with create_hook(f"go:{wanted.sku}") as hook:
        await hook
    return f"{wanted.sku} at {wanted.price}"


@contextmanager
def edited() -> Iterator[None]:
    """``Quote`` edited: its path (``<this module>:Quote``) now names the class with a required ``currency``."""
    module = sys.modules[__name__]
    original = module.Quote
    QuoteWithCurrency.__qualname__ = "Quote"
    setattr(module, "Quote", QuoteWithCurrency)  # noqa: B010 (the module's global, as a reload rebinds it)
    try:
        yield
    finally:
        setattr(module, "Quote", original)  # noqa: B010
        QuoteWithCurrency.__qualname__ = "QuoteWithCurrency"


async def test_a_step_result_whose_model_gained_a_required_field_fails_the_replay_as_a_divergence_naming_it() -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(priced, "kettle")
        await run.wait_for_hook("go:kettle")
        run_id = run.run_id
        with edited(), pytest.raises(WorkflowRunFailedError) as failed:
            await env.client.resume_hook("go:kettle", "go")
            await run.result(timeout=10)  # before: a TimeoutError, the run never ended
        assert failed.value.code == CORRUPTED_EVENT_LOG, failed.value
        message = str(failed.value)
        assert message.startswith(f"run {run_id} (unreadable.priced) failed: replaying this run could not read a "
                                  "value its log records: step 1 (event 5): the log has the result of step "
                                  "'unreadable.quote' (step_1) recorded, the code cannot read it: "), message
        assert "currency\n  Field required" in message and message.endswith(NOTE), message

        with edited():
            replayed = replay_events(await read_run(env.world, run_id))
        assert (replayed.status, replayed.change, replayed.position) == ("diverged", "value", "step 1"), replayed
        assert replayed.outline == ("step 1 (event 5): the log has the result of step 'unreadable.quote' (step_1) "
                                    f"recorded, the code cannot read it {NOTE}"), "the outline quotes no value"


async def test_a_run_input_whose_model_gained_a_required_field_diverges_on_replay_instead_of_failing_as_bad_input(
        ) -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(given, Quote(sku="mug", price=Decimal(3)))
        await run.wait_for_hook("go:mug")
        run_id = run.run_id
        with edited(), pytest.raises(WorkflowRunFailedError) as failed:
            await env.client.resume_hook("go:mug", "go")
            await run.result(timeout=10)
        assert failed.value.code == CORRUPTED_EVENT_LOG, failed.value
        assert str(failed.value).startswith(  # before: "the code returned before making that call" (hook 1)
            f"run {run_id} (unreadable.given) failed: replaying this run could not read a value its log records: "
            "the run's input "
            "(event 1): the log has the input of workflow 'unreadable.given' recorded, the code cannot read it: "), \
            failed.value
        with edited():
            replayed = replay_events(await read_run(env.world, run_id))
        assert (replayed.status, replayed.change) == ("diverged", "value"), replayed


@workflow(name="unreadable.ordered", pinned=False)
async def ordered(order_id: str, amount: float) -> str:
    async with create_hook(f"go:{order_id}") as hook:
        await hook
    return f"{order_id} for {amount}"


async def ordered_express(order_id: str, amount: float, express: bool) -> str:
    """The edit: a parameter added without a default."""
    async with create_hook(f"go:{order_id}") as hook:
        await hook
    return f"{order_id} for {amount}{' express' if express else ''}"


async def test_a_run_input_its_workflow_no_longer_takes_diverges_naming_the_parameters_and_what_to_change() -> None:
    """A parameter added without a default while a run is in flight: the replay's call of the body with the recorded
    input raised at once, which read as "the code returned before making that call" (hook 1), naming no input and
    no parameter."""
    from awsworld.authoring.definitions import REGISTRY, WorkflowDef

    async with WorkflowTestEnv() as env:
        run = await env.client.start(ordered, "O-3", 10.0)
        await run.wait_for_hook("go:O-3")
        original = REGISTRY.workflows["unreadable.ordered"]
        REGISTRY.workflows["unreadable.ordered"] = WorkflowDef("unreadable.ordered", ordered_express)
        try:
            with pytest.raises(WorkflowRunFailedError) as failed:
                await env.client.resume_hook("go:O-3", "go")
                await run.result(timeout=10)
            replayed = replay_events(await read_run(env.world, run.run_id))
        finally:
            REGISTRY.workflows["unreadable.ordered"] = original
        assert failed.value.code == CORRUPTED_EVENT_LOG, failed.value
        assert str(failed.value) == (
            f"run {run.run_id} (unreadable.ordered) failed: replaying this run could not call its workflow with the "
            "input its log "
            "records: the run's input (event 1): the log has the run's input ('O-3', 10.0) recorded, the code takes "
            "ordered(order_id, amount, express), which it does not fit: missing a "
            "required argument: 'express' (the workflow's parameters changed since the run started: give a "
            "parameter added since a default, and keep one removed (or take **kwargs), until the runs started with "
            "the old ones end)"), failed.value
        assert (replayed.status, replayed.change, replayed.position) == ("diverged", "parameters", "the run's input")
        assert replayed.outline is not None and "'O-3'" not in replayed.outline, "the outline quotes no value"


CODEC_VERSION = {"now": 1}


class VersionedCodec:
    """A codec that writes its version and reads only its own: a codec changed while runs are in flight."""

    def encode(self, value: int, place: Place, /) -> str:
        return f"v{CODEC_VERSION['now']}:{value}"

    def decode(self, data: str | bytes, place: Place, /) -> int:
        version, _, value = str(data).partition(":")
        if version != f"v{CODEC_VERSION['now']}":
            raise CodecError(f"{place}: {version} is not v{CODEC_VERSION['now']} (secret {value})")
        return int(value)


@step(name="unreadable.count", codec=VersionedCodec())
async def count(n: int) -> int:
    return n + 1


@workflow(name="unreadable.counted", pinned=False)
async def counted(n: int) -> int:
    total = await count(n)
    async with create_hook(f"go:count-{n}") as hook:
        await hook
    return total


async def test_a_step_result_its_changed_codec_cannot_decode_diverges_naming_the_value_not_the_next_call() -> None:
    """A codec changed while a run waits (a new version, another format) raises ``CodecError`` on the replay where
    the body awaits the value it decoded when the run was recorded; the body then goes another way, and the
    divergence is found at the next event. Before, it was said as that call alone (``hook 2: the log has
    create_hook(token='go:count-41'), the code returned before making that call``, change ``extra-event``), which
    sends the reader to a ``patched()`` branch. Now it names the value its codec cannot decode, first, as a value
    the code cannot read (change ``value``: what to change is the code's reading of what was recorded), with
    the divergence it caused after; the outline (stored in plain text) leaves the codec's error out."""
    async with WorkflowTestEnv() as env:
        run = await env.client.start(counted, 41)
        await run.wait_for_hook("go:count-41")
        events = await read_run(env.world, run.run_id)
        CODEC_VERSION["now"] = 2
        try:
            replayed = replay_events(events)
        finally:
            CODEC_VERSION["now"] = 1
        await env.client.resume_hook("go:count-41", "go")
        assert await run.result(timeout=10) == 42
    assert (replayed.status, replayed.change, replayed.position) == ("diverged", "value", "step 1"), replayed
    assert replayed.message is not None and replayed.outline is not None
    assert replayed.message.startswith(
        "step 1 (event 5): the log has the result of step 'unreadable.count' (step_1) recorded, its codec cannot "
        "decode it now: the result of step 'unreadable.count' (step_1) cannot be decoded by its codec "
        "VersionedCodec: CodecError: "), replayed.message
    assert "v1 is not v2" in replayed.message and "docs/how-to/codecs.md" in replayed.message
    assert replayed.message.endswith("the replay then diverged at hook 2 (event 6): the log has "
                                     "create_hook(token='go:count-41'), the code returned before making that call")
    assert "secret" not in replayed.outline and "its codec cannot decode it now" in replayed.outline


class Receipt(BaseModel):
    number: int


@workflow(name="unreadable.receipt")
async def receipt(number: int) -> Receipt:
    return Receipt(number=number)


async def test_a_result_whose_class_this_process_cannot_import_says_how_to_read_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that reads a run's result without the code that defines its model (a web app starting workflows
    that live in the worker's package): ``Run.result()`` raises ``SerializationError`` naming the class, and now
    what to do (import its module, or read the stored JSON). Before, it named the class and stopped."""
    async with WorkflowTestEnv() as env:
        run = await env.client.start(receipt, 7)
        assert await run.result(timeout=10) == Receipt(number=7)
        monkeypatch.delattr(sys.modules[__name__], "Receipt")  # as in a process without this module's classes
        with pytest.raises(serde.SerializationError) as unreadable:
            await run.result(timeout=10)
        stored = (await run.get()).output
    message = str(unreadable.value)
    assert message.startswith(f"value: cannot load '{__name__}:Receipt': "), message
    assert f"reading the result of workflow 'unreadable.receipt' of run {run.run_id}" in message, message
    assert "(await run.get()).output" in message and f"`awsworld result {run.run_id}`" in message, message
    assert stored == {"$t": "model", "c": f"{__name__}:Receipt", "v": {"number": 7}}


@workflow(name="unreadable.counted_child", codec=VersionedCodec())
async def counted_child(n: int) -> int:
    return n + 1


@workflow(name="unreadable.counted_parent", pinned=False)
async def counted_parent(n: int) -> int:
    total = await counted_child(n)
    async with create_hook(f"go:parent-{n}") as hook:
        await hook
    return total


async def test_a_child_result_its_changed_codec_cannot_decode_diverges_naming_the_childs_result() -> None:
    """The same for a child's result, which its parent reads through the child workflow's codec."""
    async with WorkflowTestEnv() as env:
        run = await env.client.start(counted_parent, 41)
        await run.wait_for_hook("go:parent-41")
        events = await read_run(env.world, run.run_id)
        CODEC_VERSION["now"] = 2
        try:
            replayed = replay_events(events)
        finally:
            CODEC_VERSION["now"] = 1
        await env.client.resume_hook("go:parent-41", "go")
        assert await run.result(timeout=10) == 42
    assert (replayed.status, replayed.change) == ("diverged", "value"), replayed
    assert replayed.message is not None
    assert "the log has the result of child run " in replayed.message, replayed.message
    assert "(unreadable.counted_child)" in replayed.message
    assert "recorded, its codec cannot decode it now: " in replayed.message
    assert "v1 is not v2" in replayed.message and "the replay then diverged at " in replayed.message
