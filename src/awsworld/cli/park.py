"""``awsworld fail RUN``: end a run on request, as failed (``Client.fail``); the way out of a parked run that will not
come back (docs/how-to/changing-code.md), besides reverting the code or branching it with ``patched()``.

What it writes, said before it writes it: one ``run_failed`` event in the run's log. For a parked run its error is
``ReplayDivergenceError`` with code ``CORRUPTED_EVENT_LOG`` (what the spec's fail-after-three-recoveries rule writes),
naming where it diverged and since when it was parked (parked because its workflow is missing:
``UnknownWorkflowError``, ``UNKNOWN_WORKFLOW``); for any other run ``FailedOnRequest`` with code
``FAILED_ON_REQUEST``. ``--reason`` ends the message. A parent awaiting the run as a child sees the failure. A run
that has ended, or an id that names no run, is a one-line error and nothing is written. A run whose KMS key is
lost (its values cannot be read, nor a value sealed) is failed too: the error, the operator's words, is stored
unsealed (docs/how-to/encryption.md, "A run whose key is lost").
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from .errors import CliError
from .output import error_text, print_json, remote, when


def register(sub: Any) -> None:
    fail = sub.add_parser("fail", help="fail a pending, running or parked run on request (one run_failed event)",
                          description=__doc__)
    fail.add_argument("run_id", metavar="RUN")
    fail.add_argument("--reason", help="added to the run's error message (up to 512 characters)")
    fail.add_argument("--json", action="store_true", help="print JSON for scripts (stable keys)")
    fail.set_defaults(handler=_fail)


def _fail(args: argparse.Namespace) -> int:
    from .._engine.parking import parked_run
    from ..world.entities import TERMINAL_RUN_STATUSES

    async def go() -> dict[str, Any]:
        async with remote() as client:
            view = await client.world.runs.get(args.run_id, resolve_data="none")
            if view.status in TERMINAL_RUN_STATUSES:
                raise CliError(f"run {args.run_id} is already {view.status}: nothing was written",
                               "only a pending, running or parked run can be failed")
            parked = parked_run(view.status, view.attributes)
            try:
                failed = await client.fail(args.run_id, reason=args.reason)
            except ValueError as error:
                raise CliError(str(error)) from None
            return {"runId": failed.run_id, "status": failed.status, "wasParked": parked is not None,
                    "parkedSince": when(parked.since) if parked else None, "error": error_text(failed.error),
                    "errorCode": failed.error_code}

    answer = asyncio.run(go())
    if args.json:
        print_json(answer)
        return 0
    print(f"failed {answer['runId']}" + (f" (parked since {answer['parkedSince']})" if answer["wasParked"] else ""))
    print(f"  wrote run_failed: {answer['error']} (error code {answer['errorCode']})")
    return 0
