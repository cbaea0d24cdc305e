"""The workflows the deploy tests run through the Lambda handlers. The handler imports this module by name
through ``AWSWORLD_MODULES``, exactly as a deployed function imports the user's modules."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from awsworld import (
    StepError,
    ValueTooLargeError,
    WebhookResponse,
    create_hook,
    create_webhook,
    respond,
    sleep,
    step,
    workflow,
)

CALLS: Counter[str] = Counter()


@step(name="deploy.square")
async def square(i: int) -> int:
    CALLS[f"square:{i}"] += 1
    return i * i


@step(name="deploy.total")
async def total(values: list[int]) -> int:
    return sum(values)


@workflow(name="deploy.fan_out_sleep")
async def fan_out_sleep(n: int, secret: str) -> dict[str, object]:
    """Fans out (so step messages are queued), sleeps durably (a delayed flow message), then finishes."""
    squares = await asyncio.gather(*(square(i) for i in range(n)))
    await sleep(1)
    return {"total": await total(list(squares)), "secret_length": len(secret)}


@step(name="deploy.slow_inc")
async def slow_inc(tag: str, x: int) -> int:
    CALLS[f"slow_inc:{tag}:{x}"] += 1
    await asyncio.sleep(0.35)
    return x + 1


@workflow(name="deploy.slow_serial")
async def slow_serial(tag: str, n: int) -> int:
    """n serial steps of 0.35 s: longer than a 1 s budget, so one delivery cannot finish it."""
    x = 0
    for _ in range(n):
        x = await slow_inc(tag, x)
    return x


@step(name="deploy.echo")
async def echo(value: str) -> str:
    return value


@workflow(name="deploy.quick")
async def quick(value: str) -> str:
    return await echo(value)


@workflow(name="deploy.webhook_twice")
async def webhook_twice() -> list[object]:
    """Takes two requests through one webhook and returns them."""
    received = []
    async with create_webhook(metadata={"purpose": "test"}) as hook:
        async for request in hook:
            received.append(request)
            if len(received) == 2:
                break
    return received


@workflow(name="deploy.webhook_then_hook")
async def webhook_then_hook(token: str) -> list[object]:
    """Takes one request through a webhook, which it then disposes, and waits on a plain hook after it."""
    async with create_webhook() as hook:
        request = await hook
    async with create_hook(token=token) as then:
        return [request, await then]


RECEIPT = WebhookResponse(200, bytes(range(256)) * 256, {"x-receipt": "static"})
"""A static answer as large as one may be (64 KiB), and not text: kept base64 in the webhook's hook_created."""


@workflow(name="deploy.webhook_static")
async def webhook_static() -> object:
    """Answers its one request with ``RECEIPT``, as soon as the request is recorded."""
    async with create_webhook(respond_with=RECEIPT) as hook:
        return await hook


@step(name="deploy.answer")
async def answer(request: dict[str, object]) -> bool:
    return await respond(request, status=200, body={"echo": str(request["body"])}, headers={"x-answered": "step"})


@workflow(name="deploy.webhook_manual")
async def webhook_manual() -> object:
    """A step answers its one request (``respond()``), and the route sends that answer."""
    async with create_webhook(respond_with="manual") as hook:
        request = await hook
        return await answer(request)


@workflow(name="deploy.plain_hook")
async def plain_hook(token: str) -> object:
    """A hook with a chosen (guessable) token: resumable from code, never over the webhook URL."""
    async with create_hook(token=token) as hook:
        return await hook


@step(name="deploy.flaky", max_retries=2, retry_delay=1.0)
async def flaky(tag: str, i: int) -> int:
    """Fails its first attempt (wherever it runs: inline or from a step message), then succeeds."""
    CALLS[f"flaky:{tag}:{i}"] += 1
    if CALLS[f"flaky:{tag}:{i}"] == 1:
        raise ConnectionError("first attempt fails")
    return i


@workflow(name="deploy.flaky_pair")
async def flaky_pair(tag: str) -> list[int]:
    return list(await asyncio.gather(flaky(tag, 1), flaky(tag, 2)))


@step(name="deploy.charge", max_retries=1, retry_delay=1.0)
async def charge(card: str) -> str:
    """Always fails, with the user's value in its message (as real code's errors do): retried once, then the
    run fails. The log tests assert the value never reaches a log line."""
    raise ValueError(f"card {card} declined")


@workflow(name="deploy.declined")
async def declined(card: str) -> str:
    return await charge(card)


# -- poison inputs: each must end its run (or its step) at once, never loop ---------------------------------------


@workflow(name="deploy.two_args")
async def two_args(a: int, b: int) -> int:
    return await echo_int(a + b)


@step(name="deploy.echo_int")
async def echo_int(value: int) -> int:
    return value


@workflow(name="deploy.raises_between_steps")
async def raises_between_steps(tag: str) -> None:
    await echo_int(1)
    raise LookupError(f"no such order {tag}")


@step(name="deploy.big_result")
async def big_result(tag: str, size: int) -> str:
    CALLS[f"big_result:{tag}"] += 1
    return "r" * size


@workflow(name="deploy.catches_big_result")
async def catches_big_result(tag: str, size: int) -> dict[str, object]:
    try:
        await big_result(tag, size)
    except StepError as error:
        return {"caught": error.error_type, "step": error.step_name}
    return {"caught": None}


@workflow(name="deploy.catches_big_input")
async def catches_big_input(size: int) -> str:
    try:
        await echo("i" * size)
    except ValueTooLargeError as error:
        return f"caught: {type(error).__name__}"
    return "not caught"


@workflow(name="deploy.big_output")
async def big_output(size: int) -> str:
    return (await echo("o" * size)) * 2  # the step's result fits; the workflow's return value does not


#: A user's own logger, as a shop's module has one (docs/operate/monitoring.md#your-own-log-lines).
SHOP_LOG = logging.getLogger("deploy.shop")


@step(name="deploy.noted_inc")
async def noted_inc(tag: str, x: int) -> int:
    SHOP_LOG.info("incrementing %s", x)
    SHOP_LOG.debug("below the level: never written")
    await asyncio.sleep(0.35)
    return x + 1


@workflow(name="deploy.logs_own_lines")
async def logs_own_lines(tag: str, n: int) -> int:
    """Writes its own lines from its body and its steps: n serial steps of 0.35 s, longer than a 1 s budget, so
    later deliveries replay the lines of the first; then a durable sleep, after which the replay the worker kept
    goes on in the next delivery."""
    SHOP_LOG.info("checkout began")
    x = 0
    for _ in range(n):
        x = await noted_inc(tag, x)
        SHOP_LOG.info("after step %s", x)
    await sleep(1)
    SHOP_LOG.warning("woke after the sleep")
    return x
