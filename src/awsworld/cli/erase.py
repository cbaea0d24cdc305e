"""``awsworld delete RUN... --yes``: delete ended runs' data now (``Client.delete_run``), for a right-to-erasure
request (GDPR art. 17, CCPA) rather than waiting for their retention.

What goes: the run's log, steps, hooks, waits, streams and stored values (its input, step values, hook payloads),
its hook tokens, and on AWS every object under its ``runs/<id>/`` prefix; a start with its id makes a new run.
What stays, and why (child runs, table backups, idempotency markers): docs/how-to/retention.md, "Erasing a run on
request". Deleting cannot be undone, so the command asks for ``--yes`` (without it: exit 2, nothing deleted).

Each RUN is deleted in turn: a run still pending or running is refused (cancel or fail it first) and the others
are deleted all the same, then the command exits 1 naming the refused ones; an id that names no run (deleted
already) is said and is no failure, so a list can be run again after any interruption. Each deleted run's child
runs, which are runs of their own, are named so they can be deleted too.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from .errors import CliError, usage
from .output import print_json, remote


def register(sub: Any) -> None:
    delete = sub.add_parser("delete", help="delete ended runs' data now (right to erasure): their log, values, "
                            "hooks, streams and stored objects; needs --yes", description=__doc__)
    delete.add_argument("run_ids", metavar="RUN", nargs="+")
    delete.add_argument("--yes", action="store_true", help="confirm: the runs' data is deleted for good")
    delete.add_argument("--json", action="store_true", help="print JSON for scripts (stable keys)")
    delete.set_defaults(handler=_delete)


def _delete(args: argparse.Namespace) -> int:
    from ..world.errors import EntityConflictError, RunNotFoundError

    if not args.yes:
        raise usage(f"deleting {len(args.run_ids)} run(s) cannot be undone: nothing was deleted",
                    "add --yes to delete them")

    async def go() -> list[dict[str, Any]]:
        outcomes: list[dict[str, Any]] = []
        async with remote() as client:
            for run_id in args.run_ids:
                try:  # (read before the run goes: its steps name them)
                    children = [child.run_id for child in await client.get_run(run_id).children()]
                except RunNotFoundError:
                    children = []
                try:
                    deleted = await client.delete_run(run_id)
                except EntityConflictError as refused:
                    outcomes.append({"runId": run_id, "deleted": False, "refused": refused.message})
                    continue
                outcomes.append({"runId": run_id, "deleted": deleted, "childRuns": children if deleted else []})
        return outcomes

    outcomes = asyncio.run(go())
    if args.json:
        print_json({"runs": outcomes})
    else:
        for outcome in outcomes:
            print(_line(outcome))
    refused = [o["runId"] for o in outcomes if "refused" in o]
    if refused:
        raise CliError(f"{len(refused)} run(s) not deleted, still unfinished: {' '.join(refused)}",
                       "cancel (awsworld cancel RUN) or fail (awsworld fail RUN) each, then delete it")
    return 0


def _line(outcome: dict[str, Any]) -> str:
    run_id = outcome["runId"]
    if "refused" in outcome:
        return f"refused {run_id}: {outcome['refused']}"
    if not outcome["deleted"]:
        return f"no run {run_id}: nothing to delete (deleted already?)"
    children = outcome["childRuns"]
    return f"deleted {run_id}" + (f" (its child runs are runs of their own, not deleted: {' '.join(children)})"
                                  if children else "")
