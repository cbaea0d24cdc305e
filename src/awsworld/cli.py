"""The ``awsworld`` command.

``awsworld demo`` runs on the embedded emulator with no AWS account: until the runtime lands it shows the
storage layer at work — a run's events written, raced and read back.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from .deploy import init as _deploy
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
    from .world import HookNotFoundError

    try:
        await world.hooks.get_by_token("approve:A-17")
        return False
    except HookNotFoundError:
        return True


async def _demo() -> None:
    from .examples.order import process_order
    from .local import LocalAWS
    from .timeline import print_timeline

    print("starting the embedded AWS emulator on 127.0.0.1 (no AWS account needed) ...")
    async with LocalAWS() as local:
        assert local.client is not None
        print("\n-- the storage layer: a run's events written, raced and read back --")
        await _storage_demo(local.world)
        print("\n-- a durable workflow: order.process --")
        run = await local.client.start(process_order, "A-17", ["kettle", "mugs", "tea"], 42.5)
        print(f"started run {run.run_id}")
        progress = asyncio.create_task(_read_progress(run))
        token = "address:A-17"
        await _wait_for_hook(local.world, token)
        print(f"the workflow waits on hook {token!r}; resuming it with an address")
        await local.client.resume_hook(token, {"address": "1 Main St"})
        result = await run.result(timeout=60)
        await asyncio.wait_for(progress, 10)
        print(f"result: {result}\n")
        await print_timeline(local.world, run.run_id)
        assert local.poller is not None
        print(f"\nflow and step deliveries handled by the local poller: {local.poller.deliveries}")


async def _read_progress(run: Any) -> None:
    async for chunk in run.stream("progress"):
        print(f"  stream 'progress': {chunk.decode().strip()}")


async def _wait_for_hook(world: Any, token: str) -> None:
    from .world import HookNotFoundError

    for _ in range(300):
        try:
            await world.hooks.get_by_token(token)
            return
        except HookNotFoundError:
            await asyncio.sleep(0.1)
    raise TimeoutError(f"hook {token!r} never appeared")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="awsworld", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the demo on the embedded emulator (no AWS account needed)")
    dev = sub.add_parser("dev", help="run the embedded emulator with your workflows loaded, until interrupted")
    dev.add_argument("modules", nargs="+", help="modules that define your @workflow and @step functions")
    _add_remote_commands(sub)
    _deploy.add_commands(sub)
    args = parser.parse_args(argv)
    if args.command in _deploy.COMMANDS:
        return _deploy.run(args)
    if args.command in ("demo", "dev"):
        try:
            import moto  # noqa: F401
        except ImportError:
            print("awsworld demo/dev need the embedded emulator: pip install 'awsworld[local]'", file=sys.stderr)
            return 2
    try:
        if args.command == "replay" and not args.run_ids and not args.workflow:
            return _replay_files(args)
        if args.command == "demo":
            asyncio.run(_demo())
        elif args.command == "dev":
            asyncio.run(_dev(args.modules))
        else:
            return asyncio.run(_remote(args))
    except KeyboardInterrupt:
        print("\nstopped")
    return 0


def _add_remote_commands(sub: Any) -> None:
    """Commands against a deployed stack (or ``awsworld dev``): resources from AWSWORLD_TABLE,
    AWSWORLD_BUCKET, AWSWORLD_QUEUE_URL and the usual AWS environment or profile."""
    start = sub.add_parser("start", help="start a run: awsworld start WORKFLOW_NAME '[args as JSON]'")
    start.add_argument("workflow")
    start.add_argument("args", nargs="?", default="[]", help="JSON list of positional arguments")
    start.add_argument("--run-id")
    start.add_argument("--wait", type=float, default=0, help="seconds to wait for the result")
    runs = sub.add_parser("runs", help="list recent runs")
    runs.add_argument("--workflow")
    runs.add_argument("--status", action="append")
    runs.add_argument("--limit", type=int, default=20)
    events = sub.add_parser("events", help="print a run's timeline")
    events.add_argument("run_id")
    resume = sub.add_parser("resume", help="resume a hook: awsworld resume TOKEN '<payload JSON>'")
    resume.add_argument("token")
    resume.add_argument("payload", nargs="?", default="null")
    cancel = sub.add_parser("cancel", help="cancel a run")
    cancel.add_argument("run_id")
    replay = sub.add_parser(
        "replay", help="replay stored runs against the current code, writing nothing; exit 1 on a divergence",
        description="Replay runs against the workflows the named modules define (-m, or AWSWORLD_MODULES) and "
                    "report each divergence: where, what the log holds, what the code did (values truncated). "
                    "Runs come from --file (written by awsworld export; no AWS needed), from RUN_IDs, or from "
                    "a listing (--workflow/--status) of the table in AWSWORLD_TABLE (a deployed stack, or "
                    "awsworld dev's emulator).")
    replay.add_argument("run_ids", nargs="*", metavar="RUN_ID")
    replay.add_argument("--file", "-f", action="append", default=[], help="a file written by awsworld export")
    replay.add_argument("--module", "-m", action="append", default=[], help="a module defining your workflows")
    replay.add_argument("--workflow", help="replay the runs of this workflow (with --status, default running)")
    replay.add_argument("--status", action="append")
    replay.add_argument("--limit", type=int, default=100)
    export = sub.add_parser("export", help="write runs' event logs to a file, for awsworld replay --file")
    export.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    export.add_argument("--output", "-o", help="the file to write (default: stdout); holds user payloads")


async def _remote(args: Any) -> int:
    import json

    from .aws import AWSWorld
    from .runtime.client import Client
    from .timeline import print_timeline

    async with AWSWorld() as world:
        client = Client(world)
        if args.command == "start":
            run = await client.options(run_id=args.run_id).start(args.workflow, *json.loads(args.args))
            print(run.run_id)
            if args.wait:
                print(json.dumps(await run.result(timeout=args.wait), default=str))
        elif args.command == "runs":
            page = await client.list_runs(workflow=args.workflow, status=args.status, limit=args.limit)
            for run in page.data:
                print(f"{run.run_id}  {run.status:<10} {run.workflow_name}  {run.created_at:%Y-%m-%d %H:%M:%S}")
        elif args.command == "events":
            await print_timeline(world, args.run_id)
        elif args.command == "resume":
            event = await client.resume_hook(args.token, json.loads(args.payload))
            print(f"delivered as {event.event_id} to run {event.run_id}")
        elif args.command == "cancel":
            await client.cancel(args.run_id)
            print(f"cancelled {args.run_id}")
        elif args.command == "export":
            await _export(world, args)
        elif args.command == "replay":
            return await _replay_stored(world, client, args)
    return 0


def _load_modules(args: Any) -> None:
    import importlib
    import os

    from .lambda_.container import MODULES_ENV, module_names

    sys.path.insert(0, os.getcwd())
    for name in [*args.module, *module_names(os.environ.get(MODULES_ENV))]:
        importlib.import_module(name)


def _report(results: list[Any]) -> int:
    for result in results:
        print(result.describe())
    bad = sum(not r.ok for r in results)
    print(f"{len(results)} run(s) replayed, {bad} diverged or could not be replayed")
    return 1 if bad else 0


def _replay_files(args: Any) -> int:
    from .runtime.replayer import load_export, replay_events

    _load_modules(args)
    if not args.file:
        print("awsworld replay: name RUN_IDs, --workflow, or --file", file=sys.stderr)
        return 2
    return _report([replay_events(events) for path in args.file for events in load_export(path)])


async def _replay_stored(world: Any, client: Any, args: Any) -> int:
    from .runtime.replayer import load_export, replay_events, replay_run

    _load_modules(args)
    run_ids = list(args.run_ids)
    if args.workflow:
        page = await client.list_runs(workflow=args.workflow, status=args.status or ["running"], limit=args.limit)
        run_ids += [run.run_id for run in page.data]
    results = [replay_events(events) for path in args.file for events in load_export(path)]
    results += [await replay_run(world, run_id) for run_id in run_ids]
    return _report(results)


async def _export(world: Any, args: Any) -> None:
    from .runtime.replayer import export_lines, read_run

    lines = [line for run_id in args.run_ids for line in export_lines(await read_run(world, run_id))]
    text = "".join(f"{line}\n" for line in lines)
    if args.output:
        from pathlib import Path

        await asyncio.to_thread(Path(args.output).write_text, text, encoding="utf-8")
        print(f"{len(lines)} event(s) of {len(args.run_ids)} run(s) written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)


async def _dev(modules: list[str]) -> None:
    """Import the user's modules (registering their workflows and steps), then serve deliveries."""
    import importlib
    import os

    sys.path.insert(0, os.getcwd())
    for module in modules:
        importlib.import_module(module)
    from .local import LocalAWS
    from .runtime.registry import REGISTRY

    async with LocalAWS() as local:
        config = local.config
        print(f"awsworld dev: {len(REGISTRY.workflows)} workflow(s), {len(REGISTRY.steps)} step(s) loaded")
        for name in sorted(REGISTRY.workflows):
            print(f"  workflow {name}")
        print("\npoint a Client at this environment with:")
        print(f"  AWS_ENDPOINT_URL={config.endpoint_url} AWSWORLD_TABLE={config.table_name} "
              f"AWSWORLD_BUCKET={config.bucket_name} AWSWORLD_QUEUE_URL={config.queue_url}")
        print("  AWS_ACCESS_KEY_ID=awsworldlocal AWS_SECRET_ACCESS_KEY=local AWS_REGION=us-east-1")
        print("\nserving deliveries; Ctrl-C to stop")
        await asyncio.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
