"""What one hook heartbeat costs, against what a resume costs: DynamoDB and SQS requests, items written, and the
write units DynamoDB Local reports (``ReturnConsumedCapacity``; a lower bound for multi-item transactions).

``Client.heartbeat_hook`` reads the token and the run (as ``resume_hook`` does, to refuse an ended run with its
status) and writes one conditional ``hook_received``; it sends no wake-up, where a resume sends one SQS message.
A heartbeat re-arms the hook's heartbeat wait only when the run next replays, so a run heartbeating every
``h`` seconds against a timeout ``T`` is replayed about once per ``T - h``, not once per heartbeat.

Run: ``.venv/bin/python bench/hook_heartbeats.py``.
"""

from __future__ import annotations

import asyncio
import uuid

from awsworld import Client
from awsworld.aws import AWSWorld, RequestStats
from awsworld.local import LocalAWS


def _fmt(stats: RequestStats) -> str:
    ops = ", ".join(f"{k}={v}" for k, v in sorted(stats.requests.items()))
    return (f"{stats.total():>2} req  {stats.transaction_items:>2} items written  reported "
            f"{stats.write_units:>4.1f} WRU {stats.read_units:>4.1f} RRU   {ops}")


async def _costs(world: AWSWorld) -> None:
    client = Client(world)
    created = await world.events.create(None, {"eventType": "run_created",
                                               "eventData": {"workflowName": "bench", "input": None}})
    assert created.run is not None
    run_id = created.run.run_id
    await world.events.create(run_id, {"eventType": "run_started"})
    token = f"beat-{uuid.uuid4().hex}"
    await world.events.create(run_id, {"eventType": "hook_created", "correlationId": "hook_1",
                                       "eventData": {"token": token}})
    await client.heartbeat_hook(token)  # warm: the run's position is known from its last write
    for name, call in (("heartbeat_hook", lambda: client.heartbeat_hook(token)),
                       ("resume_hook", lambda: client.resume_hook(token, {"n": 1}))):
        before = world.stats.snapshot()
        await call()
        print(f"  {name:<15} {_fmt(world.stats.snapshot() - before)}")


async def main() -> None:
    print("per call, on DynamoDB Local (SQS on moto)")
    async with LocalAWS(dynamodb="dynamodb-local", run_workflows=False) as local:
        await _costs(local.world)


if __name__ == "__main__":
    asyncio.run(main())
