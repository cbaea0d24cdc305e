"""A newcomer's first-hour mistakes, each answered where it is made with what to write instead: a method, a plain
``def``, an async generator or a class decorated as a step or workflow, a name given without ``name=``, and
durations written as words, as a number in a string or too long for a datetime. In memory (``WorkflowTestEnv``)
where a run is needed."""

from __future__ import annotations

import asyncio

import pytest

from awsworld import WorkflowRunFailedError, child_options, sleep, step, workflow
from awsworld.testing import WorkflowTestEnv

HERE = __file__


def test_a_method_decorated_as_a_step_is_refused_where_it_is_decorated() -> None:
    """A step method: ``self`` is one of the step's arguments, which a call records. It was accepted, and the run
    failed at its first call with ``cannot serialize <class 'Svc'>``, naming neither the method nor the fix."""
    with pytest.raises(TypeError) as refused:
        class Svc:
            @step(name="newcomer.svc.charge")
            async def charge(self, amount: float) -> str:
                return f"charged {amount}"
    assert str(refused.value).startswith(
        "@step cannot decorate the method "
        "test_a_method_decorated_as_a_step_is_refused_where_it_is_decorated.<locals>.Svc.charge "
        f"({HERE}, line "), refused.value
    assert "a step's arguments are recorded in the run's log, and `self` would be one of them. Make it a " \
        "module-level async def" in str(refused.value)

    class Kept:
        @staticmethod
        @step(name="newcomer.svc.static")
        async def fee(amount: float) -> float:  # no self: a static method is a plain function, and is a step
            return amount * 0.01

    assert Kept.fee.__name__ == "fee"


def test_what_is_not_an_async_def_is_refused_saying_what_it_is() -> None:
    """``@step("shop.charge")`` (a name without ``name=``), a plain ``def``, an ``async def`` that yields and a
    class: each said only ``needs an async def function, got <function f at 0x...>`` (or the name string)."""
    def plain(n: int) -> int:
        return n

    async def chunks(n: int):  # type: ignore[no-untyped-def]  (an async generator, as users write one)
        yield n

    class Flow:
        pass

    cases = [(lambda: step("shop.charge"), "@step takes its name as a keyword: @step(name='shop.charge')"),  # type: ignore[call-overload, arg-type]
             (lambda: step(plain), "@step needs an async def function, got test_what_is_not_an_async_def_is_refused_"  # type: ignore[arg-type]
              f"saying_what_it_is.<locals>.plain ({HERE}, line "),
             (lambda: workflow(name="newcomer.chunks")(chunks), "@workflow needs an async def function, got "  # type: ignore[arg-type]
              "test_what_is_not_an_async_def_is_refused_saying_what_it_is.<locals>.chunks ("),
             (lambda: workflow(name="newcomer.flow")(Flow), "@workflow needs an async def function, got the class "  # type: ignore[arg-type]
              "test_what_is_not_an_async_def_is_refused_saying_what_it_is.<locals>.Flow")]
    for make, start in cases:
        with pytest.raises(TypeError) as refused:
            make()
        assert str(refused.value).startswith(start), refused.value
    with pytest.raises(TypeError, match=r", a plain def: write `async def`$"):
        step(plain)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"an async def that yields \(an async generator\): return the values as a "
                       r"list, or write them to a stream \(get_writable\)$"):
        step(name="newcomer.chunks_step")(chunks)  # type: ignore[arg-type]


def test_a_retry_delay_is_named_as_written() -> None:
    async def fetch() -> None:
        return None

    with pytest.raises(ValueError, match=r"^retry_delay must not be negative, got -1$"):  # it said initial_delay
        step(name="newcomer.fetch", retry_delay=-1)(fetch)


@workflow(name="newcomer.nap")
async def nap(duration: object) -> str:
    await sleep(duration)  # type: ignore[arg-type]
    return "rested"


@pytest.mark.parametrize(("duration", "says"), [
    ("5 minutes", "sleep(): cannot read '5 minutes' as a duration at 'inutes': use <number><unit> parts with units "
                  "ms, s, m, h, d (e.g. '500ms', '10s', '5m', '2h', '1d', '1h30m'); write '5m'"),
    ("1 hour 30 mins", "; write '1h30m'"),
    ("90", "; a number of seconds is a number, not text: 90, or '90s'"),
    (1e12, "sleep() of 1000000000000.0 ends after the year 9999, the last a datetime holds: a wait that long never "
           "ends"),  # it said only "date value out of range"
    (1e15, "sleep() of 1000000000000000.0 seconds is longer than a timedelta holds (999999999 days): a wait that "
           "long never ends"),
])
async def test_a_sleep_written_as_words_or_too_long_says_what_to_write(duration: object, says: str) -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(nap, duration)
        with pytest.raises(WorkflowRunFailedError) as failed:
            await run.result(timeout=10)
    assert failed.value.error_type == "ValueError", failed.value  # type: ignore[attr-defined]
    assert str(failed.value).endswith(says), failed.value


@step(name="newcomer.gives_up", max_retries=2)
async def gives_up(order_id: str) -> str:
    raise asyncio.CancelledError(f"the client library gave up on {order_id}")  # as some libraries do


@step(name="newcomer.gives_up_timed", max_retries=2, timeout="1m")
async def gives_up_timed(order_id: str) -> str:  # (with a timeout: the body runs in a task of its own)
    raise asyncio.CancelledError(f"the client library gave up on {order_id}")


@workflow(name="newcomer.gives_up_flow")
async def gives_up_flow(order_id: str, timed: bool) -> str:
    return await (gives_up_timed(order_id) if timed else gives_up(order_id))


@pytest.mark.parametrize("timed", [False, True])
async def test_a_cancelled_error_a_step_raises_fails_it_with_its_line(timed: bool) -> None:
    """A step body that raises ``asyncio.CancelledError`` itself, nothing having cancelled it: it read as the
    delivery being cut off, the attempt ran again, and the step failed with ``StepInterruptedError: ... its delivery
    was cut off``, the body's line lost. Now the attempt fails with the ``CancelledError`` and its traceback; a
    ``BaseException``, it is not retried (as ``SystemExit`` is not)."""
    async with WorkflowTestEnv() as env:
        run = await env.client.start(gives_up_flow, "A-1", timed)
        with pytest.raises(WorkflowRunFailedError) as failed:
            await run.result(timeout=10)
        [attempted] = await run.steps()
    name = "newcomer.gives_up_timed" if timed else "newcomer.gives_up"
    assert str(failed.value).endswith(
        f"step {name!r} failed: CancelledError: the client library gave up on A-1"), failed.value
    assert (attempted.status, attempted.attempt) == ("failed", 1)
    assert "raise asyncio.CancelledError(f\"the client library gave up on {order_id}\")" in \
        str(getattr(attempted.error, "stack", "")), attempted.error


@workflow(name="newcomer.parent_of_a_step")
async def parent_of_a_step(order_id: str) -> str:
    return await child_options().call(gives_up, order_id)  # type: ignore[arg-type]  (a step, as a newcomer writes)


async def test_a_step_given_where_a_workflow_is_needed_is_named_as_a_step() -> None:
    """A ``@step`` passed to a client's start or to a child call, the likely slip of a newcomer: it said
    ``<function gives_up at 0x...> is not a @workflow``, neither naming the step nor saying what to start."""
    says = "'newcomer.gives_up' is a @step, not a @workflow"
    async with WorkflowTestEnv() as env:
        with pytest.raises(TypeError) as started:
            await env.client.start(gives_up, "A-1")  # type: ignore[arg-type]
        assert str(started.value) == f"{says}: a step runs inside a workflow; start a @workflow that awaits it"
        run = await env.client.start(parent_of_a_step, "A-2")
        with pytest.raises(WorkflowRunFailedError) as failed:
            await run.result(timeout=10)
    assert str(failed.value).endswith(f"failed: {says} (only workflows start child runs): a step runs inside a "
                                      "workflow; start a @workflow that awaits it"), failed.value

    async def plain(order_id: str) -> str:
        return order_id

    with pytest.raises(TypeError, match=r"is not a @workflow: decorate it with @workflow$"):
        async with WorkflowTestEnv() as env:
            await env.client.start(plain, "A-3")  # type: ignore[arg-type]
