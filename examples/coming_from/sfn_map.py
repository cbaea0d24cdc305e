"""A Step Functions Map state over orders, with a retrier on its task, ported (docs: Coming from Step Functions).

The state machine it ports::

    "ProcessOrders": {"Type": "Map", "ItemsPath": "$.orders", "MaxConcurrency": 2, "ToleratedFailurePercentage": 25,
      "ItemProcessor": {"StartAt": "Process", "States": {"Process": {"Type": "Task", "End": true,
        "Resource": "arn:aws:states:::lambda:invoke", "Parameters": {"FunctionName": "process-order", ...},
        "Retry": [{"ErrorEquals": ["Throttled"], "IntervalSeconds": 2, "MaxAttempts": 3}]}}}}
"""

import asyncio

from awsworld import RetryPolicy, WorkflowRunFailedError, map, step, workflow

CALLS: dict[str, int] = {}


class Throttled(Exception):
    pass


# --8<-- [start:map]
# "Retry": [{"ErrorEquals": ["Throttled"], "IntervalSeconds": 2, "MaxAttempts": 3}]: BackoffRate defaults to 2.0,
# MaxAttempts counts retries (max_attempts counts attempts), no jitter and no MaxDelaySeconds by default.
@step(name="sfn.process_order", retry=RetryPolicy(retry_on=(Throttled,), initial_delay=2, backoff=2.0,
                                                  max_attempts=4, max_delay=None, jitter=0))
async def process_order(order: dict) -> str:  # the Task state; what the Lambda function did
    CALLS[order["id"]] = CALLS.get(order["id"], 0) + 1
    if order.get("busy") and CALLS[order["id"]] < 3:
        raise Throttled(order["id"])  # retried 2 s, then 4 s later
    if order.get("bad"):
        raise ValueError(f"order {order['id']} has no lines")  # not in ErrorEquals: fails the item at once
    return f"processed {order['id']}"


@workflow(name="sfn.process_orders")
async def process_orders(orders: list[dict]) -> dict:
    results = await map(process_order, orders, max_concurrency=2, tolerated_failure_fraction=0.25)
    return {"processed": results.values(),  # raises BatchError past the tolerance, as the Map state fails
            "failed": [item.index for item in results if item.status == "failed"]}
# --8<-- [end:map]


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        orders = [{"id": "a"}, {"id": "b", "busy": True}, {"id": "c"}, {"id": "d", "bad": True}]
        run = await env.client.start(process_orders, orders)
        assert await run.result() == {"processed": ["processed a", "processed b", "processed c"], "failed": [3]}
        assert CALLS == {"a": 1, "b": 3, "c": 1, "d": 1}

        too_many = [{"id": "e", "bad": True}, {"id": "f", "bad": True}, {"id": "g"}, {"id": "h"}]
        failed = await env.client.start(process_orders, too_many)  # 2 of 4 failed: past 25 %
        try:
            await failed.result()
            raise AssertionError("the Map failed past its tolerance")
        except WorkflowRunFailedError as error:
            assert "failure_tolerance_exceeded" in str(error), error


if __name__ == "__main__":
    asyncio.run(main())
