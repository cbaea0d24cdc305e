"""``awsworld skip RUN [--wait NAME]``: end a run's wait now (a sleep, a hook's timeout, a retry's back-off), as an
operator, on ``awsworld dev`` or a deployed stack (``Client.skip_wait``).

The log records the skip as an operator's, with when the wait was due, so ``awsworld replay`` of the run agrees,
and the run is woken to go on at once. Without ``--wait`` the run's one wait is skipped; a run with several
names none of them by default (skipping a hook's timeout sends the workflow down its timeout path): the command
lists them and exits 2, and ``--wait`` names one by its id or name as ``describe`` and ``events`` show them.
Exit codes: 0 skipped (or it ended by itself a moment before), 1 the run has finished or waits on nothing that
can be skipped, or is a TypeScript app's run (its app ends its sleeps: `getRun(runId).wakeUp()`), 2 no such wait,
or several fit.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

from .errors import CliError, usage
from .output import print_json, remote

if TYPE_CHECKING:
    from ..client.skips import SkippedWait


def register(sub: Any) -> None:
    skip = sub.add_parser("skip", help="end a run's wait now: a sleep, a hook's timeout, a retry's back-off",
                          description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    skip.add_argument("run_id", metavar="RUN")
    skip.add_argument("--wait", metavar="NAME", help="the wait's id (wait_3, step_2) or name, as `awsworld "
                      "describe RUN` shows it (default: the run's only wait)")
    skip.add_argument("--json", action="store_true", help="print JSON for scripts (stable keys)")
    skip.set_defaults(handler=_skip)


def _skip(args: argparse.Namespace) -> int:
    from .._engine.parking import parked_run
    from .._timeline import deadline_text
    from ..client.skips import AmbiguousWaitError, WaitNotFoundError
    from ..world.errors import RunGoneError

    async def go() -> tuple[SkippedWait, bool]:
        async with remote() as client:
            try:
                done = await client.skip_wait(args.run_id, args.wait)
                view = await client.world.runs.get(args.run_id, resolve_data="none")
                return done, parked_run(view.status, view.attributes) is not None
            except RunGoneError as gone:
                raise CliError(gone.message, f"`awsworld describe {args.run_id}` shows how it ended") from None
            except WaitNotFoundError as missing:
                if args.wait is None:
                    raise CliError(str(missing), f"`awsworld describe {args.run_id}` shows what it waits on") \
                        from None
                raise usage(missing.text(deadline_text), "name a wait by its id or name, as `awsworld describe` "
                            "shows it") from None
            except AmbiguousWaitError as several:
                raise usage(several.text(deadline_text), f"`awsworld skip {args.run_id} --wait ID` with one of the "
                            "ids above") from None

    done, parked = asyncio.run(go())
    if args.json:
        print_json(done.to_json())
        return 0
    print(skipped_text(done, parked=parked))
    return 0


def parked_then(run_id: str) -> str:
    """What becomes of a parked run that an operator's act reached (a skip, a hook's payload): nothing yet."""
    return f"the run is parked: it goes on once code replays its log (`awsworld describe {run_id}` says where)"


def skipped_text(done: SkippedWait, *, parked: bool) -> str:
    """What ``skip`` did, for people: the wait with its due time as ``describe`` shows it, and whether the run goes
    on now, or, parked (its replay diverges from its log), once code replays it: a skip moves no parked run."""
    from .._timeline import deadline_text

    wait = done.wait.described(deadline_text)
    what = "the retry back-off of" if done.wait.kind == "retry" else "wait"
    then = parked_then(done.run_id) if parked else "the run goes on now"
    if done.event is None:
        return f"{what} {wait} had ended by itself: nothing skipped; " + \
            (then if parked else "the run goes on")
    return f"skipped {what} {wait} of run {done.run_id} (recorded as {done.event.event_id}); {then}"
