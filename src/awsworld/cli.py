"""The ``awsworld`` command.

``awsworld demo`` runs on the embedded emulator with no AWS account: until the runtime lands it shows the
storage layer at work — a run's events written, raced and read back.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from .world import EntityConflictError, InBandSupersededError, World


def _line(slot: str, kind: str, correlation: str | None, detail: str) -> str:
    return f"  {slot:>4}  {kind:<15} {correlation or '-':<10} {detail}"


async def _storage_demo(world: World) -> None:
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
    print(f"3 steps declared in one batch write: slots {[o.result.event.slot for o in batch.results if o.result]}")

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
    from .world import HookNotFoundError

    try:
        await world.hooks.get_by_token("approve:A-17")
        return False
    except HookNotFoundError:
        return True


async def _demo() -> None:
    from .local import LocalAWS

    print("starting the embedded AWS emulator on 127.0.0.1 ...")
    async with LocalAWS() as local:
        await _storage_demo(local.world)
        stats = local.world.stats  # type: ignore[attr-defined]
        print("\nAWS requests made:", ", ".join(f"{k}={v}" for k, v in sorted(stats.requests.items())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="awsworld", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the demo on the embedded emulator (no AWS account needed)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        asyncio.run(_demo())
    return 0


if __name__ == "__main__":
    sys.exit(main())
