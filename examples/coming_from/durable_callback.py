"""A Lambda durable function's ``wait_for_callback`` (a submitter hands the callback id to an outside system, the
execution waits for its answer, with a timeout and a heartbeat timeout), ported (docs: Coming from Lambda durable
functions). The durable function it ports::

    @durable_execution
    def handler(event, context: DurableContext):
        config = WaitForCallbackConfig(timeout=Duration.from_hours(24), heartbeat_timeout=Duration.from_hours(1))
        result = context.wait_for_callback(lambda callback_id, ctx: submit(callback_id, event), name="approval",
                                           config=config)
        return {"callbackResult": result, "completed": True}
"""

import asyncio

from awsworld import HookHeartbeatTimeoutError, create_hook, step, workflow

SUBMITTED: list[str] = []  # what the outside system received, for the example


# --8<-- [start:callback]
@step(name="durable.submit")  # the submitter: a step, retried by its own policy (the config's retry_strategy)
async def submit(callback_id: str, request: dict) -> None:
    SUBMITTED.append(callback_id)  # e.g. a message to the approver, carrying the callback id


@workflow(name="durable.approval")
async def approval(request: dict) -> dict:
    try:
        async with create_hook(timeout="24h", heartbeat_timeout="1h", name="approval") as callback:
            await submit(callback.token, request)
            result = await callback  # client.resume_hook(token, result), or awsworld resume TOKEN 'JSON'
    except HookHeartbeatTimeoutError:  # SendDurableExecutionCallbackHeartbeat missed: client.heartbeat_hook
        return {"completed": False, "why": "the approver went silent"}
    return {"callbackResult": result, "completed": True}
# --8<-- [end:callback]


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        client = env.client
        run = await client.start(approval, {"amount": 120})
        await env.idle()
        callback_id = SUBMITTED[-1]
        await env.sleep("50m")
        await client.heartbeat_hook(callback_id)  # the approver is still on it
        await env.sleep("50m")
        await client.resume_hook(callback_id, {"approved": True})
        assert await run.result() == {"callbackResult": {"approved": True}, "completed": True}

        silent = await client.start(approval, {"amount": 7})  # nobody answers, nor beats: an hour, skipped
        assert await silent.result() == {"completed": False, "why": "the approver went silent"}


if __name__ == "__main__":
    asyncio.run(main())
