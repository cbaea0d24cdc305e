"""What pyright must see in user code: checked by ``test_typing.py`` (``npx pyright``), never imported or run.

``# reveal: T`` on a ``reveal_type`` line is the type pyright must reveal there; ``# expected-error: rule, ...``
marks a line pyright must reject with exactly those errors (one rule per error: a call no overload of
``Client.start`` accepts gets ``reportCallIssue`` plus the reason), and no other line may have an error.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, assert_type, reveal_type

from pydantic import BaseModel

import awsworld
from awsworld import (
    ChildRun,
    Client,
    PydanticCodec,
    RetryPolicy,
    Run,
    child_options,
    create_hook,
    poll_until,
    start_child,
    step,
    workflow,
)
from awsworld.world.entities import Hook


class Quote(BaseModel):
    sku: str
    price: int


QUOTES = PydanticCodec(Quote)


@step(codec=QUOTES)
async def quote(sku: str) -> Quote:
    return Quote(sku=sku, price=1)


@workflow(name="typing-sample.quoted", codec=QUOTES)
async def quoted(sku: str) -> Quote:
    return await quote(sku)


@step(codec=QUOTES)  # expected-error: reportArgumentType
async def not_a_quote(sku: str) -> str:
    return sku


@step
async def square(x: int) -> int:
    return x * x


@step(max_retries=5, name="typing-sample.shout")
async def shout(text: str, *, times: int = 1) -> str:
    return text.upper() * times


@step(retry=RetryPolicy(max_attempts=5, initial_delay="1s", max_delay="1m", retry_on=ConnectionError),
      timeout="30s")
async def status(job: str) -> dict[str, bool]:
    return {"done": True}


@step(semantics="at_most_once", retry=RetryPolicy(max_attempts=3))
async def charge(cents: int) -> str:
    return f"charged {cents}"


@workflow
async def total(xs: list[int]) -> int:
    return sum([await square(x) for x in xs])


@workflow(name="typing-sample.greet")
async def greet(name: str, *, loud: bool = False) -> str:
    return await shout(name) if loud else name


async def usage(client: Client) -> None:
    reveal_type(square)  # reveal: (x: int) -> Coroutine[Any, Any, int]
    reveal_type(shout)  # reveal: (text: str, *, times: int = 1) -> Coroutine[Any, Any, str]
    reveal_type(total)  # reveal: (xs: list[int]) -> Coroutine[Any, Any, int]
    reveal_type(greet)  # reveal: (name: str, *, loud: bool = False) -> Coroutine[Any, Any, str]
    assert_type(await square(3), int)
    reveal_type(charge)  # reveal: (cents: int) -> Coroutine[Any, Any, str]
    reveal_type(status)  # reveal: (job: str) -> Coroutine[Any, Any, dict[str, bool]]
    assert_type(await poll_until(status, "j-1", predicate=lambda s: s["done"], interval="10s"), dict[str, bool])
    assert_type(await poll_until(square, initial_state=1, predicate=lambda n: n > 10, max_attempts=5), int)

    run = await client.start(total, [1, 2, 3])
    reveal_type(run)  # reveal: Run[int]
    reveal_type(await run.result())  # reveal: int
    assert_type(await (await client.start(greet, "ada", loud=True)).result(timeout=5), str)

    by_id = await client.options(run_id="order-17").start(greet, "ada")
    reveal_type(by_id)  # reveal: Run[str]
    by_name = await client.start("typing-sample.greet", "ada")
    reveal_type(by_name)  # reveal: Run[Any]
    assert_type(client.get_run("wrun_x"), Run[Any])
    hook = await run.wait_for_hook("tok", timeout=1.0)
    assert_type(hook, Hook)
    widened: Run[object] = run  # a run's result type is covariant
    del widened

    # What must be rejected:
    await square("not an int")  # expected-error: reportArgumentType
    RetryPolicy(initial_delay=[1])  # expected-error: reportArgumentType
    step(semantics="at-most-once")  # expected-error: reportArgumentType
    await client.start(total, "wrong")  # expected-error: reportCallIssue, reportArgumentType
    await client.start(greet, "ada", loud="yes")  # expected-error: reportCallIssue, reportArgumentType
    await client.start(greet)  # expected-error: reportCallIssue, reportCallIssue
    await client.options(run_id="x").start(total, [1], extra=1)  # expected-error: reportCallIssue, reportCallIssue
    mistyped: Run[str] = await client.start(total, [1])  # expected-error: reportAssignmentType
    del mistyped


async def batch_usage(hook: awsworld.Hook) -> None:
    squares = await awsworld.map(square, [1, 2, 3], max_concurrency=2)
    reveal_type(squares)  # reveal: BatchResult[int]
    reveal_type(squares.values())  # reveal: list[int]
    reveal_type(squares[0].value)  # reveal: int | None
    assert_type(await awsworld.batch_map(shout, ["a"]), awsworld.BatchResult[str])
    assert_type(await awsworld.first_successful(square(1), square(2)), int)
    await awsworld.first_successful(square(1), hook, awsworld.sleep(1))
    awsworld.create_hook("t", timeout=timedelta(hours=1))
    await awsworld.map(square, ["x"])  # expected-error: reportArgumentType
    async def indexed(item: str, index: int) -> str:
        return f"{index}{item}"
    indexes = await awsworld.map(indexed, ["a"], with_index=True, item_name=lambda s, i: s)
    assert_type(indexes, awsworld.BatchResult[str])
    await awsworld.map(indexed, ["a"])  # expected-error: reportArgumentType
    assert_type(await awsworld.parallel(square(1), lambda: square(2), names=["one", None]), awsworld.BatchResult[int])
    assert_type(await awsworld.with_name("charge").call(shout, "a", times=2), str)
    assert_type(await awsworld.with_name("child").call(greet, "ada"), str)
    await awsworld.with_name("charge").call(shout, 3)  # expected-error: reportArgumentType
    await awsworld.sleep(1, name="cool-down")
@workflow
async def parent(n: int) -> str:
    assert_type(await total([n]), int)  # a child run, awaited: the workflow's return type
    child = await start_child(greet, "ada", loud=True)
    reveal_type(child)  # reveal: ChildRun[str]
    detached = await child_options(detached=True).start(total, [n])
    assert_type(detached, ChildRun[int])
    assert_type(await detached, int)
    await start_child(total, "wrong")  # expected-error: reportArgumentType
    await start_child(greet, "ada", loud="yes")  # expected-error: reportArgumentType
    return await child


@workflow
async def codec_usage(client: Client) -> None:
    reveal_type(QUOTES)  # reveal: PydanticCodec[Quote]
    reveal_type(quote)  # reveal: (sku: str) -> Coroutine[Any, Any, Quote]
    reveal_type(quoted)  # reveal: (sku: str) -> Coroutine[Any, Any, Quote]
    reveal_type(await (await client.start(quoted, "kettle")).result())  # reveal: Quote
    hook = create_hook("quote", codec=QUOTES)
    reveal_type(hook)  # reveal: Hook[Quote]
    reveal_type(await hook)  # reveal: Quote
    reveal_type(create_hook("plain"))  # reveal: Hook[Any]


ORDER_ARGS = PydanticCodec(tuple[Quote, int])


@step(codec=QUOTES, args_codec=ORDER_ARGS)
async def requote(order: Quote, extra: int = 0) -> Quote:
    return order


@workflow(args_codec=ORDER_ARGS)
async def reorder(order: Quote, extra: int) -> int:
    return extra


@step(args_codec=ORDER_ARGS)  # expected-error: reportArgumentType
def not_async(order: Quote) -> int:
    return 1


@step
async def poll_quote(state: Quote) -> Quote:
    return state


@workflow
async def legacy_quote(sku: str) -> dict[str, Any]:
    return {"sku": sku, "price": 1}


@workflow
async def codec_places(client: Client) -> None:
    reveal_type(requote)  # reveal: (order: Quote, extra: int = 0) -> Coroutine[Any, Any, Quote]
    reveal_type(reorder)  # reveal: (order: Quote, extra: int) -> Coroutine[Any, Any, int]
    await client.start(reorder, Quote(sku="a", price=1), "x")  # expected-error: reportCallIssue, reportArgumentType
    quotes = await awsworld.map(requote, [Quote(sku="a", price=1)])
    reveal_type(quotes)  # reveal: BatchResult[Quote]
    reveal_type(quotes.values())  # reveal: list[Quote]
    first = Quote(sku="a", price=1)
    reveal_type(await poll_until(poll_quote, initial_state=first, codec=QUOTES))  # reveal: Quote
    await poll_until(poll_quote, initial_state=first, codec=PydanticCodec(int))  # expected-error: reportArgumentType
    typed = child_options(codec=QUOTES)
    reveal_type(await typed.start(legacy_quote, "a"))  # reveal: ChildRun[Quote]
    reveal_type(await typed.call(legacy_quote, "a"))  # reveal: Quote
    reveal_type(await child_options(name="plain").call(legacy_quote, "a"))  # reveal: dict[str, Any]
    reveal_type(await child_options().start(legacy_quote, "a"))  # reveal: ChildRun[dict[str, Any]]
    await typed.call(legacy_quote, 3)  # expected-error: reportArgumentType
