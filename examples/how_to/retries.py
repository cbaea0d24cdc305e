"""Retries, timeouts, durations and cancelling with a reason (docs: Concepts / Steps and workflows)."""

import asyncio

from awsworld import (
    RetryableError,
    RetryPolicy,
    WorkflowRunCancelledError,
    create_hook,
    sleep,
    step,
    step_metadata,
    workflow,
)


# --8<-- [start:policies]
@step(name="retries.fetch", retry=RetryPolicy(max_attempts=5, initial_delay="1s", backoff=2, max_delay="1m",
                                              jitter=0.2, retry_on=ConnectionError))
async def fetch(url: str) -> str:
    if step_metadata().attempt < 3:
        raise ConnectionError("reset by peer")  # retried: 1 s, then 2 s (less up to 20 % jitter)
    return f"body of {url}"


@step(name="retries.submit", retry=RetryPolicy.fixed("2s", max_attempts=3), timeout="30s")
async def submit(form: dict[str, str]) -> str:
    if step_metadata().attempt == 1:
        raise RetryableError("rate limited", retry_after="10s")  # this one retry waits 10 s
    return "accepted"


@step(name="retries.notify", max_retries=2, retry_delay=60)  # 3 attempts a fixed minute apart
async def notify(text: str) -> None: ...
# --8<-- [end:policies]


@workflow(name="retries.crawl")
async def crawl(url: str) -> list[str]:
    body = await fetch(url)
    answer = await submit({"url": url})
    await sleep("1h30m")  # seconds, a timedelta, "500ms" ... "1d", or an aware datetime
    return [body, answer]


@workflow(name="retries.wait_forever")
async def wait_forever(order_id: str) -> None:
    async with create_hook(token=f"never:{order_id}") as hook:
        await hook


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        run = await env.client.start(crawl, "https://example.com")
        assert await run.result() == ["body of https://example.com", "accepted"]
        assert [(s.step_name, s.attempt) for s in await run.steps()] == [("retries.fetch", 3),
                                                                          ("retries.submit", 2)]
        waiting = await env.client.start(wait_forever, "A-1")
        await waiting.wait_for_hook("never:A-1")
        # --8<-- [start:cancel]
        await env.client.cancel(waiting.run_id, reason="customer withdrew")
        try:
            await waiting.result()
        except WorkflowRunCancelledError as cancelled:
            assert cancelled.reason == "customer withdrew"
        # --8<-- [end:cancel]


if __name__ == "__main__":
    asyncio.run(main())
