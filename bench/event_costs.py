"""What one ``events.create`` costs: DynamoDB requests and billable units, per event type.

Requests and the items each transaction writes are counted on the client (deterministic). DynamoDB bills a
transactional write 2 write units per KiB of every item it touches, so ``>= 2 x items`` is the floor (every
item here is under 1 KiB). The "reported" units are what DynamoDB Local returns for ``ReturnConsumedCapacity``;
it under-reports multi-item transactions, so read them as a lower bound, not a bill.
"""

from __future__ import annotations

from typing import Any

from awsworld.aws import AWSWorld, RequestStats


def _fmt(stats: RequestStats) -> str:
    ops = ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in sorted(stats.requests.items()))
    items = stats.transaction_items
    return (f"{stats.total():>3} req  {items:>3} items written (>= {2 * items:>3} WRU)"
            f"  reported {stats.write_units:>5.1f} WRU {stats.read_units:>5.1f} RRU   {ops}")


async def _measure(world: AWSWorld, run_id: str | None, event: dict[str, Any], **kwargs: Any) -> tuple[Any, str]:
    before = world.stats.snapshot()
    result = await world.events.create(run_id, event, **kwargs)
    return result, _fmt(world.stats.snapshot() - before)


async def event_costs(world: AWSWorld) -> None:
    print("\nper events.create (warm World: the run's position is known from its last write)")
    created, line = await _measure(world, None, {"eventType": "run_created",
                                                 "eventData": {"workflowName": "bench", "input": {"n": 1}}})
    print(f"  {'run_created':<15} {line}")
    run_id = created.run.run_id
    sequence: list[tuple[str, dict[str, Any]]] = [
        ("run_started", {"eventType": "run_started"}),
        ("step_created", {"eventType": "step_created", "correlationId": "s1",
                          "eventData": {"stepName": "add", "input": [1, 2]}}),
        ("step_started", {"eventType": "step_started", "correlationId": "s1"}),
        ("step_completed", {"eventType": "step_completed", "correlationId": "s1", "eventData": {"result": 3}}),
        ("wait_created", {"eventType": "wait_created", "correlationId": "w1",
                          "eventData": {"resumeAt": "2030-01-01T00:00:00Z"}}),
        ("wait_completed", {"eventType": "wait_completed", "correlationId": "w1"}),
        ("hook_created", {"eventType": "hook_created", "correlationId": "h1", "eventData": {"token": f"t-{run_id}"}}),
        ("hook_received", {"eventType": "hook_received", "correlationId": "h1", "eventData": {"payload": 1}}),
        ("hook_disposed", {"eventType": "hook_disposed", "correlationId": "h1"}),
        ("attr_set", {"eventType": "attr_set", "eventData": {"changes": [{"key": "k", "value": "v"}]}}),
        ("run_completed", {"eventType": "run_completed", "eventData": {"output": 3}}),
    ]
    for name, event in sequence:
        _, line = await _measure(world, run_id, event)
        print(f"  {name:<15} {line}")

    print("\na 10-step serial run's log, written as the inline loop writes it (event_count on flow writes)")
    before = world.stats.snapshot()
    result = await world.events.create(None, {"eventType": "run_created",
                                              "eventData": {"workflowName": "bench", "input": None}})
    run_id = result.run.run_id
    count = 1
    await world.events.create(run_id, {"eventType": "run_started"}, event_count=count)
    count += 1
    for i in range(10):
        step = f"step-{i}"
        await world.events.create(run_id, {"eventType": "step_created", "correlationId": step,
                                           "eventData": {"stepName": "work", "input": i}}, event_count=count)
        await world.events.create(run_id, {"eventType": "step_started", "correlationId": step})
        await world.events.create(run_id, {"eventType": "step_completed", "correlationId": step,
                                           "eventData": {"result": i}})
        count += 3
    await world.events.create(run_id, {"eventType": "run_completed", "eventData": {"output": 10}},
                              event_count=count)
    total = world.stats.snapshot() - before
    print(f"  whole run ({count + 1} events): {_fmt(total)}")
    print(f"  per step: {total.total() / 10:.1f} requests, {total.transaction_items / 10:.1f} items written "
          f"(>= {2 * total.transaction_items / 10:.1f} WRU), reported {total.write_units / 10:.1f} WRU, "
          f"{total.read_units / 10:.1f} RRU")
