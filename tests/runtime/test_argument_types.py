"""Arguments checked against a workflow's annotations wherever a run starts (``authoring.arguments``): pydantic,
strict mode, a ``TypeError`` (``ArgumentTypeError``) naming the workflow, the parameter, the expected type and the
value, before anything is written; what fits is stored exactly as passed. ``Client.start`` (by function and by name),
``options(run_id=...)``, schedules (created, declared, triggered), child calls (at the call site; a call the
parent's log records replays as recorded), and a start that could not check (no workflow code) failed by its first
delivery before the body runs. Opt-outs: ``validate_args=False``, ``Any``/unannotated parameters, ``args_codec``
(checked by its codec). In memory and on LocalAWS, through the real delivery path."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from awsworld import (
    ArgumentTypeError,
    CodecError,
    Place,
    PydanticCodec,
    Schedule,
    WorkflowRunFailedError,
    child_options,
    create_hook,
    schedule,
    sleep,
    workflow,
)
from awsworld._worker.run_control import create_run, wake_run
from awsworld.authoring.errors import USER_ERROR
from awsworld.client.client import Client
from awsworld.durable import codecs, serde
from awsworld.world.errors import RunNotFoundError

from .conftest import BOTH, E2E, on_backends

e2e_backend = on_backends(BOTH)

BODIES: list[str] = []  # which bodies ran (a refused start runs none)


@workflow(name="argtypes.order")
async def order(order_id: str, items: list[str], amount: float) -> dict[str, Any]:
    BODIES.append(order_id)
    return {"id": order_id, "items": items, "amount": amount, "amountType": type(amount).__name__}


@workflow(name="argtypes.tagged")
async def tagged(*counts: int, **labels: str) -> int:
    return sum(counts) + len(labels)


@workflow(name="argtypes.loose", validate_args=False)
async def loose(amount: float) -> str:
    return type(amount).__name__


@workflow(name="argtypes.untyped")
async def untyped(a, b: Any, c: object) -> list[str]:  # type: ignore[no-untyped-def]
    return [type(a).__name__, type(b).__name__, type(c).__name__]


@workflow(name="argtypes.coded", args_codec=PydanticCodec(tuple[str, int]))
async def coded(name: str, n: int) -> str:
    return f"{name}:{n!r}"


@workflow(name="argtypes.parent")
async def parent(mode: str) -> dict[str, Any]:
    """Calls ``order`` as a child: with arguments it cannot take (``bad``, ``caught``) or that fit."""
    if mode == "bad":
        await order("T-1", "abc", "12")  # type: ignore[arg-type]
    caught = None
    if mode == "caught":
        try:
            await order("T-1", ["a"], "12")  # type: ignore[arg-type]
        except TypeError as refused:
            caught = str(refused)
        await sleep(1)  # a later delivery replays the refused call: it must be refused again, at the same point
    return {"caught": caught, "child": await order("T-2", ["b"], 7)}


@workflow(name="argtypes.lenient_child", validate_args=False)
async def lenient_child(order_id: str, amount: float) -> str:
    return f"{order_id}:{amount!r}"


CHILD: list[Any] = [lenient_child]  # what ``in_flight`` calls: the test swaps in a checking copy (a new version)


def checking(fn: Any) -> Any:
    """A child call of ``fn``'s workflow as a version that checks its arguments makes it (same name, same body)."""

    def version() -> None: ...

    vars(version)["__awsworld_workflow__"] = replace(fn.__awsworld_workflow__, validate_args=True)

    async def call(*args: Any, **kwargs: Any) -> Any:
        return await child_options().call(version, *args, **kwargs)

    return call


@workflow(name="argtypes.in_flight")
async def in_flight(key: str) -> str:
    value = await CHILD[0]("T-9", "12")
    async with create_hook(token=f"argtypes:{key}") as hook:
        await hook
    return str(value)


# (call, where the message must point) for order(order_id: str, items: list[str], amount: float)
MISTAKES: list[tuple[tuple[Any, ...], dict[str, Any], str]] = [
    (("T-1", "abc", "12"), {}, "parameter 'items' expects list[str], got 'abc' (str): Input should be a valid list"),
    (("T-1", ["a"], "12"), {}, "parameter 'amount' expects float, got '12' (str): Input should be a valid number"),
    (("T-1", ["a", 3], 1.5), {}, "parameter 'items' expects list[str], got ['a', 3] (list): at [1]: Input should "
                                 "be a valid string"),
    ((17,), {"items": [], "amount": 1.0}, "parameter 'order_id' expects str, got 17 (int)"),
    (("T-1", [], True), {}, "parameter 'amount' expects float, got True (bool)"),
]


async def test_arguments_that_do_not_fit_the_annotations_are_refused_before_anything_is_written(e2e: E2E) -> None:
    await e2e.idle()
    deliveries = e2e.poller.deliveries
    for target in (order, "argtypes.order"):  # by name: checked against the client's registry
        for args, kwargs, message in MISTAKES:
            run_id = f"argtypes-{uuid.uuid4().hex}"
            with pytest.raises(ArgumentTypeError) as refused:
                await e2e.client.options(run_id=run_id).start(target, *args, **kwargs)
            assert str(refused.value).startswith(f"workflow 'argtypes.order': {message}"), refused.value
            assert isinstance(refused.value, TypeError)
            with pytest.raises(RunNotFoundError):
                await e2e.world.runs.get(run_id)
    with pytest.raises(ArgumentTypeError, match=r"parameter 'counts\[1\]' expects int, got '2' \(str\)"):
        await e2e.client.start(tagged, 1, "2")
    with pytest.raises(ArgumentTypeError, match=r"parameter 'b' \(\*\*labels\) expects str, got 3 \(int\)"):
        await e2e.client.start(tagged, 1, a="x", b=3)
    await e2e.idle()
    assert await e2e.queue_depth() == 0 and e2e.poller.deliveries == deliveries, "nothing queued or delivered"
    assert (await e2e.world.runs.list(workflow_name="argtypes.order")).data == [], "no run recorded"


async def test_what_fits_is_stored_exactly_as_passed(e2e: E2E) -> None:
    run = await e2e.start(order, "T-1", ["a", "b"], 12)  # an int for a float: the numeric tower, kept an int
    assert await run.result(timeout=30) == {"id": "T-1", "items": ["a", "b"], "amount": 12, "amountType": "int"}
    created = (await run.events())[0]
    assert created.event_type == "run_created" and created.event_data is not None
    assert created.event_data["input"] == serde.dumps({"args": ["T-1", ["a", "b"], 12], "kwargs": {}})
    assert await e2e.run(tagged, 1, 2, a="x") == 4


async def test_the_opt_outs(e2e: E2E) -> None:
    assert await e2e.run(loose, "12") == "str", "validate_args=False: only the call's shape is checked"
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        await e2e.client.start(loose)
    assert await e2e.run(untyped, 1, "b", None) == ["int", "str", "NoneType"], "no annotation, Any, object"
    assert await e2e.run(coded, "x", "5") == "x:5", "an args_codec checks (and, lax, converts) its own"
    with pytest.raises(CodecError, match=r"argtypes\.coded"):
        await e2e.client.start(coded, "x", "five")
    assert (await e2e.world.runs.list(workflow_name="argtypes.coded")).data[0].status == "completed", \
        "the refused start wrote nothing"


async def test_a_start_that_could_not_check_is_failed_by_its_first_delivery(e2e: E2E) -> None:
    codeless = Client(e2e.world)  # a client of a deployed stack: no workflow code, no registry
    before = len(BODIES)
    run = await codeless.start("argtypes.order", "T-1", ["a"], "12")
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    assert failed.value.code == USER_ERROR and failed.value.error_type == "ArgumentTypeError"
    assert "parameter 'amount' expects float, got '12' (str)" in str(failed.value)
    assert len(BODIES) == before, "the body never ran"
    good = await codeless.start("argtypes.order", "T-2", ["a"], 2.5)
    assert (await good.result(timeout=30))["amount"] == 2.5


_NOWHERE = Place("input", "a starter without the code")  # (no codec: store_call never names it)


async def test_a_start_without_the_code_has_its_arguments_put_through_the_workflows_args_codec(e2e: E2E) -> None:
    """A starter that does not know the workflow (another language over HTTP, a client without its code) stores
    JSON arguments without the codec: the run's first delivery puts them through it, so the body gets the codec's
    types, and what the codec refuses fails the run before the body runs, never a TypeError inside it."""

    async def started_without_the_codec(*args: Any, **kwargs: Any) -> Any:
        run_id = f"wrun_{uuid.uuid4().hex}"  # recorded as such a starter records it: {"args", "kwargs"} as JSON
        stored = codecs.store_call(args, kwargs, None, coded, _NOWHERE)
        await create_run(e2e.world, run_id, "argtypes.coded", stored, {})
        await wake_run(e2e.world, run_id, "argtypes.coded", "start")
        return await e2e.client.get_run(run_id).result(timeout=30)

    assert await started_without_the_codec("x", "5") == "x:5", "validated by the codec (lax: '5' is 5)"
    assert await started_without_the_codec("y", n=6) == "y:6", "keyword arguments bind to their parameters"
    with pytest.raises(WorkflowRunFailedError) as failed:
        await started_without_the_codec("z", "five")
    assert failed.value.error_type == "CodecError", failed.value
    assert "the input of workflow 'argtypes.coded'" in str(failed.value) and "valid integer" in str(failed.value)
    with pytest.raises(WorkflowRunFailedError, match="do not fit it: too many positional arguments"):
        await started_without_the_codec("z", 1, 2)


async def test_a_child_call_that_does_not_fit_raises_at_the_call_site(e2e: E2E) -> None:
    before = len(BODIES)
    run = await e2e.start(parent, "bad")
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    assert failed.value.code == USER_ERROR and failed.value.error_type == "ArgumentTypeError"
    assert "workflow 'argtypes.order': parameter 'items' expects list[str], got 'abc'" in str(failed.value)
    assert not [e for e in await run.events() if e.event_type == "step_created"], "no child call was declared"
    assert (await run.children()) == [] and len(BODIES) == before

    caught = await e2e.run(parent, "caught")  # refused on the first delivery and again on the one after the sleep
    assert caught["caught"].startswith("workflow 'argtypes.order': parameter 'amount' expects float, got '12'")
    assert caught["child"]["amount"] == 7


async def test_a_child_call_the_log_records_replays_as_recorded(e2e: E2E) -> None:
    key = uuid.uuid4().hex
    old = await e2e.start(in_flight, key)  # its child takes "12" for a float: this version does not check
    await e2e.hook_ready(f"argtypes:{key}", old)
    CHILD[0] = checking(lenient_child)  # a new version: the child's arguments are checked
    try:
        await e2e.client.resume_hook(f"argtypes:{key}", "go")
        assert await old.result(timeout=30) == "T-9:'12'", "the recorded call replays, nothing diverges"
        new = await e2e.start(in_flight, uuid.uuid4().hex)
        with pytest.raises(WorkflowRunFailedError, match="parameter 'amount' expects float, got '12'"):
            await new.result(timeout=30)
    finally:
        CHILD[0] = lenient_child


async def test_schedules_check_their_arguments_where_they_are_made(e2e: E2E) -> None:
    schedules = e2e.client.schedules
    bad = Schedule(every="1h", args=("T-1", "abc", "12"))
    with pytest.raises(ArgumentTypeError, match="parameter 'items' expects list"):
        await schedules.create(f"argtypes-{uuid.uuid4().hex[:8]}", order, bad)
    with pytest.raises(ArgumentTypeError, match="parameter 'items' expects list"):
        await schedules.create(f"argtypes-{uuid.uuid4().hex[:8]}", "argtypes.order", bad)
    assert [s for s in await schedules.list() if s.workflow_name == "argtypes.order"] == [], "nothing stored"

    with pytest.raises(TypeError, match=r"schedule 'argtypes\.declared': its arguments do not fit: .*'amount'"):
        @workflow(name="argtypes.declared", schedule=Schedule(every="1d", args=("T-1", [], "12")))
        async def declared(order_id: str, items: list[str], amount: float) -> None: ...
    with pytest.raises(TypeError, match=r"schedule 'argtypes\.later': .*'amount' expects float"):
        schedule(order, Schedule(id="argtypes.later", every="1d", args=("T-1", [], "12")))

    # Stored by a client without the code (nothing to check with): triggering it where the code is known is
    # refused; started by one that cannot check, the run's first delivery fails it before the body runs.
    schedule_id = f"argtypes-{uuid.uuid4().hex[:8]}"
    codeless = Client(e2e.world).schedules
    await codeless.create(schedule_id, "argtypes.order", bad)
    with pytest.raises(ArgumentTypeError, match="parameter 'items'"):
        await schedules.trigger(schedule_id)
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    with pytest.raises(ArgumentTypeError):
        await schedules.backfill(schedule_id, start, start + timedelta(hours=2))
    triggered = await codeless.trigger(schedule_id)
    assert triggered.outcome == "started" and triggered.run_id is not None
    with pytest.raises(WorkflowRunFailedError, match="parameter 'items' expects list"):
        await e2e.client.get_run(triggered.run_id).result(timeout=30)
    await schedules.delete(schedule_id)
