"""``awsworld demo``: a durable workflow on the embedded emulator, no AWS account needed.

It opens with what a user writes and sees: a run of ``order.process`` (its steps, a retry, a durable sleep, a
hook the demo resumes, a stream read live), its result and its timeline. ``--storage`` adds the storage
layer underneath (a run's events written in one batch, writers racing for a slot, a stale orchestrator fenced
off): how it works, not what using it looks like.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..world import World


def register(sub: Any) -> None:
    demo = sub.add_parser("demo", help="run a durable workflow on the embedded emulator (no AWS account needed)",
                          description=__doc__)
    demo.add_argument("--storage", action="store_true",
                      help="then show the storage layer at work: batch writes, races, fencing")
    demo.set_defaults(handler=_main, needs_emulator=True)


def _main(args: argparse.Namespace) -> int:
    asyncio.run(_demo(storage=args.storage))
    return 0


def _line(slot: str, kind: str, correlation: str | None, detail: str) -> str:
    return f"  {slot:>4}  {kind:<15} {correlation or '-':<10} {detail}"


async def _storage_demo(world: World) -> None:
    from ..world import EntityConflictError, InBandSupersededError

    events = world.events
    created = await events.create(None, {"eventType": "run_created",
                                         "eventData": {"workflowName": "checkout", "input": {"order": "A-17"}}})
    assert created.run is not None
    run_id = created.run.run_id
    print(f"run {run_id} created (workflow 'checkout')")
    await events.create(run_id, {"eventType": "run_started"})

    batch = await events.create_batch(run_id, [
        {"eventType": "step_created", "correlationId": f"pack-{i}", "eventData": {"stepName": "pack", "input": i}}
        for i in range(3)
    ])
    slots = [o.result.event.slot for o in batch.results if o.result and o.result.event]
    print(f"3 steps declared in one batch write: slots {slots}")

    async def claim(writer: int) -> str:
        try:
            await events.create(run_id, {"eventType": "step_created", "correlationId": "charge",
                                         "eventData": {"stepName": "charge", "input": writer}})
            return f"writer {writer} won"
        except EntityConflictError:
            return f"writer {writer} got 409"

    outcomes = await asyncio.gather(*(claim(w) for w in range(4)))
    print("4 writers race for step 'charge':", ", ".join(outcomes))

    page = await events.list(run_id)
    assert page.snapshot is not None
    try:
        await events.create(run_id, {"eventType": "step_started", "correlationId": "charge"}, in_band=True,
                            expected_seq_in_band=page.snapshot.seq_in_band - 1)
    except InBandSupersededError as error:
        print(f"a stale orchestrator is fenced off: 412 (seq={error.seq}, seqInBand={error.seq_in_band})")

    other = await events.create(None, {"eventType": "run_created", "eventData": {"workflowName": "checkout"}})
    assert other.run is not None
    await events.create(other.run.run_id, {"eventType": "run_started"})
    await events.create(run_id, {"eventType": "hook_created", "correlationId": "approve",
                                 "eventData": {"token": "approve:A-17"}})
    conflict = await events.create(other.run.run_id, {"eventType": "hook_created", "correlationId": "approve-2",
                                                      "eventData": {"token": "approve:A-17"}})
    assert conflict.event is not None
    print(f"a second run asking for token 'approve:A-17' gets {conflict.event.event_type}")

    for i in range(3):
        await events.create(run_id, {"eventType": "step_started", "correlationId": f"pack-{i}"})
        await events.create(run_id, {"eventType": "step_completed", "correlationId": f"pack-{i}",
                                     "eventData": {"result": f"box-{i}"}})
    await events.create(run_id, {"eventType": "hook_received", "correlationId": "approve",
                                 "eventData": {"payload": {"approved": True}}})
    await events.create(run_id, {"eventType": "run_completed", "eventData": {"output": {"shipped": 3}}})

    print(f"\nthe log of {run_id}, read back (dense slots, in commit order):")
    page = await events.list(run_id)
    for event in page.data:
        data = event.event_data or {}
        detail = ", ".join(f"{k}={v}" for k, v in data.items())
        print(_line(str(event.slot), event.event_type, event.correlation_id, detail[:60]))
    run = await world.runs.get(run_id)
    print(f"\nrun status: {run.status}, output: {run.output}; token 'approve:A-17' is free again:",
          await _token_free(world))


async def _token_free(world: World) -> bool:
    from ..world import HookNotFoundError

    try:
        await world.hooks.get_by_token("approve:A-17")
        return False
    except HookNotFoundError:
        return True


async def _demo(*, storage: bool) -> None:
    from .._timeline import print_timeline
    from ..examples.order import process_order
    from ..local import LocalAWS

    print("starting the embedded AWS emulator on 127.0.0.1 (no AWS account needed) ...")
    async with LocalAWS() as local:
        assert local.client is not None
        print("\n-- a durable workflow: order.process --")
        print("reserve 3 items at once, charge (fails once, retried), pack (streaming progress), sleep 2 s,")
        print("wait for the customer's address on a hook, ship\n")
        run = await local.client.start(process_order, "A-17", ["kettle", "mugs", "tea"], 42.5)
        print(f"started run {run.run_id}")
        progress = asyncio.create_task(_read_progress(run))
        token = "address:A-17"
        await run.wait_for_hook(token, timeout=60)
        print(f"the run waits on hook {token!r} (no compute while it waits); resuming it with an address")
        await local.client.resume_hook(token, {"address": "1 Main St"})
        result = await run.result(timeout=60)
        await asyncio.wait_for(progress, 10)
        print(f"result: {result}\n")
        await print_timeline(local.world, run.run_id)
        assert local.poller is not None
        print(f"\nflow and step deliveries handled by the local poller: {local.poller.deliveries}")
        print("next: write your own workflow (docs/get-started/first-workflow.md), then `awsworld dev yourmodule`")
        if storage:
            print("\n-- underneath: the storage layer (a run's events written, raced and read back) --")
            await _storage_demo(await local.new_world())


async def _read_progress(run: Any) -> None:
    async for chunk in run.stream("progress"):
        print(f"  stream 'progress': {chunk.decode().strip()}")
