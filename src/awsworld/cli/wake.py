"""``awsworld wake RUN``: the operator's way to move a run whose message was lost (``Client.wake``).

A run whose message is gone (purged, deleted, redriven under a new id) sits ``running`` with nothing
happening; the watchdog wakes it on its own once its due passes (docs/operate/lost-messages.md), and this does
it now. What the wake's flow does with steps still leased to a delivery that may be alive is said here, so the
operator knows when the run will move. A run of the Workflow SDK's TypeScript runtime is refused (exit 1, nothing
sent): only its app can wake it, and the error says how.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime
from typing import Any

from .errors import CliError
from .output import print_json, remote


def register(sub: Any) -> None:
    wake = sub.add_parser("wake", help="send a run a flow message (its own was lost); the watchdog does it too",
                          description=__doc__)
    wake.add_argument("run_id", metavar="RUN")
    wake.add_argument("--json", action="store_true", help="print JSON for scripts (stable keys)")
    wake.set_defaults(handler=_wake)


def _wake(args: argparse.Namespace) -> int:
    from .._engine.parking import parked_run
    from ..world.entities import TERMINAL_RUN_STATUSES

    async def go() -> dict[str, Any]:
        async with remote() as client:
            view = await client.world.runs.get(args.run_id, resolve_data="none")
            if view.status in TERMINAL_RUN_STATUSES:
                raise CliError(f"run {args.run_id} is {view.status}", "only a pending or running run can be woken")
            steps = [s for s in await client.get_run(args.run_id).steps() if s.status == "running"]
            await client.wake(args.run_id)
            now = datetime.now(UTC)
            parked = parked_run(view.status, view.attributes)
            return {"runId": args.run_id, "status": view.status,
                    "parked": None if parked is None else parked.to_json(), "leased": [
                {"stepId": s.step_id, "stepName": s.step_name, "attempt": s.attempt,
                 "leaseUntil": s.lease_until.isoformat() if s.lease_until else None,
                 "expired": s.lease_until is not None and s.lease_until <= now} for s in steps]}

    answer = asyncio.run(go())
    if args.json:
        print_json(answer)
        return 0
    if answer["parked"] is not None:  # its delivery finds what parked it, unless the code changed since
        print(f"woke {answer['runId']} (parked): its delivery replays it against the code there, and it stays parked "
              f"until that code replays it (`awsworld describe {answer['runId']}` says why it is parked)")
    else:
        print(f"woke {answer['runId']} ({answer['status']})")
    for step in answer["leased"]:
        if step["expired"]:
            print(f"  {step['stepId']} ({step['stepName']}, attempt {step['attempt']}): its lease has passed; "
                  "the wake takes it over as a new attempt")
        else:
            print(f"  {step['stepId']} ({step['stepName']}, attempt {step['attempt']}): leased to a delivery "
                  f"until {step['leaseUntil']}; the run comes back by itself then, and takes it over if it has "
                  "not finished")
    return 0
