"""What a user's type checker must see in their code: checked by ``test_typing.py`` with ``npx pyright`` in strict
mode (the comment below) and ``mypy --strict``, never imported or run.

``# reveal: T`` on a ``reveal_type`` line is the type pyright must reveal there; ``# expected-error: rule, ...``
marks a line pyright must reject with exactly those errors (one rule per error: a call no overload of
``Client.start`` accepts gets ``reportCallIssue`` plus the reason) and mypy must reject too; no other line may have
an error in either (strict pyright's "partially unknown" included: no ``Any`` may leak into a user's types).
"""

# pyright: strict

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict, assert_type, reveal_type

from pydantic import BaseModel

import awsworld
from awsworld import (
    ChildRun,
    Client,
    Hook,
    PydanticCodec,
    RetryPolicy,
    Run,
    Schedule,
    child_options,
    create_hook,
    create_webhook,
    get_writable,
    poll_until,
    schedule,
    start_child,
    step,
    workflow,
)
from awsworld.testing import WorkflowTestEnv
from awsworld.world import HookRecord, RunPage


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
    reveal_type(total)  # reveal: Workflow[(xs: list[int]), int]
    reveal_type(greet)  # reveal: Workflow[(name: str, *, loud: bool = False), str]
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
    assert_type(hook, HookRecord)
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


async def batch_usage(hook: awsworld.Hook[str]) -> None:
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
    reveal_type(quoted)  # reveal: Workflow[(sku: str), Quote]
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
    reveal_type(reorder)  # reveal: Workflow[(order: Quote, extra: int), int]
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


# A user's package as `pyright --strict` and `mypy --strict` see it: dataclasses, TypedDicts, Optionals, typed hook
# payloads, streams, schedules, the test environment, and a workflow type of their own (awsworld.Workflow).


@dataclass
class Address:
    street: str
    zip_code: str | None = None


class Approval(TypedDict):
    approved: bool
    by: str


APPROVALS = PydanticCodec(Approval)


@step(max_retries=3)
async def price(sku: str, qty: int = 1, *gifts: str, discount: float = 0.0) -> int:
    return qty * 100 + len(gifts) - int(discount)


@step
async def ship(address: Address) -> str | None:
    writer = get_writable("progress")
    await writer.write(b"shipping")
    return address.zip_code


@workflow
async def fulfil(address: Address) -> str | None:
    return await ship(address)


@step
async def answer_webhook(request: awsworld.WebhookRequest) -> bool:
    """A manual webhook's request, answered: ``respond()`` takes what ``await create_webhook()`` gives."""
    return await awsworld.respond(request, status=202, body={"queued": True})


@workflow(name="typing-sample.checkout", retention="7d")
async def checkout(order_id: str, address: Address, *, express: bool = False) -> dict[str, int]:
    reveal_type(price)  # reveal: (sku: str, qty: int = 1, *gifts: str, discount: float = 0) -> Coroutine[Any, Any, int]
    assert_type(await price("kettle", 2, "card", "bow", discount=0.5), int)
    assert_type(await fulfil(address), str | None)  # a child run, awaited
    assert_type(await start_child(fulfil, address), ChildRun[str | None])
    approval = create_hook(f"approve:{order_id}", codec=APPROVALS, timeout="1d")
    assert_type(approval, Hook[Approval])
    assert_type((await approval)["by"], str)
    async with create_hook(codec=APPROVALS) as updates:
        async for update in updates:
            assert_type(update, Approval)
    named: Hook[Approval] = create_hook(f"note:{order_id}")  # no codec: Any, which the user may name
    assert_type(await named, Approval)
    request = await create_webhook(timeout=timedelta(hours=1))
    reveal_type(request)  # reveal: WebhookRequest
    reveal_type(request["body"])  # reveal: str | bytes | None
    assert_type(request["headers"], dict[str, str])
    assert_type(await answer_webhook(request), bool)
    async for later in create_webhook(respond_with="manual"):
        assert_type(later, awsworld.WebhookRequest)
        request["bodyy"]  # expected-error: reportGeneralTypeIssues
    assert_type(await awsworld.map(price, ["a", "b"]), awsworld.BatchResult[int])
    assert_type(await awsworld.map(fulfil, [address]), awsworld.BatchResult[str | None])
    assert_type(await awsworld.parallel(price("a"), lambda: price("b")), awsworld.BatchResult[int])
    await awsworld.sleep(timedelta(minutes=5))
    await awsworld.sleep(datetime(2030, 1, 1, tzinfo=UTC))
    return {"cents": await price("kettle", discount=0.1 if express else 0.0)}


@workflow
async def nightly() -> None:
    await checkout("nightly", Address("1 Main St"))


schedule(nightly, Schedule(cron="0 3 * * *"))


async def plain_function(order_id: str) -> int:
    return len(order_id)


async def launch(client: Client, flow: awsworld.Workflow[[Address], str | None], address: Address) -> str | None:
    return await (await client.start(flow, address)).result()


async def app(client: Client) -> None:
    run = await client.start(checkout, "o-1", Address("1 Main St", "02139"), express=True)
    assert_type(run, Run[dict[str, int]])
    assert_type(await run.result(timeout=None), dict[str, int])
    assert_type(await launch(client, fulfil, Address("x")), str | None)
    async for chunk in run.stream("progress"):
        assert_type(chunk, bytes)
    assert_type(await client.list_runs(workflow=checkout), RunPage)
    await client.schedules.create("nightly", nightly, Schedule(every="1d"))
    as_callable: Callable[[Address], Coroutine[Any, Any, str | None]] = fulfil  # a workflow is still its function
    del as_callable

    # What must be rejected:
    await client.start(checkout, "o-1", "1 Main St")  # expected-error: reportCallIssue, reportArgumentType
    await client.start(price, "kettle")  # expected-error: reportCallIssue, reportArgumentType, reportCallIssue
    await client.start(plain_function, "o-1")  # expected-error: reportCallIssue, reportArgumentType, reportCallIssue
    await client.list_runs(workflow=price)  # expected-error: reportArgumentType
    await client.schedules.create("hourly", price, Schedule(every="1h"))  # expected-error: reportArgumentType
    await launch(client, checkout, Address("x"))  # expected-error: reportArgumentType
    price("kettle")  # expected-error: reportUnusedCoroutine
    await awsworld.sleep([5])  # expected-error: reportArgumentType
    await price("kettle", 1, 2)  # expected-error: reportArgumentType
    create_hook(codec=Approval)  # expected-error: reportCallIssue, reportArgumentType
    workflow(retension="7d")  # expected-error: reportCallIssue
    client.options(run_id=17)  # expected-error: reportArgumentType
    shipped: str = await fulfil(Address("x"))  # expected-error: reportAssignmentType
    del shipped


@workflow
async def steps_are_not_children(address: Address) -> None:
    await start_child(ship, address)  # expected-error: reportArgumentType, reportCallIssue
    await child_options().call(ship, address)  # expected-error: reportCallIssue, reportArgumentType, reportCallIssue


async def test_checkout(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(checkout, "o-1", Address("1 Main St"))
    assert_type(await run.result(), dict[str, int])
    assert_type(awsworld_env.advance("1h"), datetime)
    async with WorkflowTestEnv(schedules=[nightly], start_time=datetime(2030, 1, 1, tzinfo=UTC)) as env:
        assert_type(env.client, Client)
    WorkflowTestEnv(schedules=[ship])  # expected-error: reportArgumentType
