"""``awsworld export`` and ``awsworld replay``: check changed workflow code against stored runs."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import CliError, check_run_listing, usage
from .output import add_project_to_path, check_config, import_failure, print_json, remote

if TYPE_CHECKING:
    from ..client.replay import ReplayResult
    from ..world.events import Event


def register(sub: Any) -> None:
    replay = sub.add_parser(
        "replay", help="replay stored runs against the current code, writing nothing; exit 1 on a divergence a "
                       "deploy would meet",
        description="Replay runs against the workflows the named modules define (-m, or AWSWORLD_MODULES) and "
                    "report each divergence: where, what the log holds, what the code did (values truncated). "
                    "Runs come from --file (written by awsworld export; no AWS needed), from RUN_IDs, or from "
                    "a listing (--workflow/--status) of the table in AWSWORLD_TABLE (a deployed stack, or "
                    "awsworld dev's emulator). A divergence of an unfinished run pinned to its deployment is "
                    "printed but does not make the exit 1 (a deploy leaves that run on its own code) unless "
                    "--include-pinned.")
    replay.add_argument("run_ids", nargs="*", metavar="RUN_ID")
    replay.add_argument("--file", "-f", action="append", default=[], help="a file written by awsworld export")
    replay.add_argument("--module", "-m", action="append", default=[], help="a module defining your workflows")
    replay.add_argument("--workflow", help="replay the runs of this workflow (with --status, default running)")
    replay.add_argument("--status", action="append",
                        help="with --workflow: the runs in this status (repeat it for several; default running)")
    replay.add_argument("--limit", type=int, default=100,
                        help="with --workflow: at most this many of its runs, one page of the listing (1 to 100)")
    replay.add_argument("--include-pinned", action="store_true",
                        help="count the divergences of runs pinned to their deployment too (exit 1): the check "
                             "before `awsworld upgrade` moves runs to this code")
    replay.add_argument("--json", action="store_true", help="print JSON for scripts (stable keys): each run's "
                        "outcome and the counts; the exit code as without it")
    replay.set_defaults(handler=_replay)
    export = sub.add_parser("export", help="write runs' event logs to a file, for awsworld replay --file")
    export.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    export.add_argument("--output", "-o", help="the file to write (default: stdout), made 0600: it holds the runs' "
                                                "payloads, in the clear (decrypted on a stack that encrypts them)")
    export.set_defaults(handler=_export)


def load_modules(modules: list[str]) -> None:
    """Import ``modules`` and those ``AWSWORLD_MODULES`` names, from the project's directory: the code runs are
    replayed against."""
    from ..settings import SETTINGS, module_names

    add_project_to_path()
    for name in [*modules, *module_names(SETTINGS.modules)]:
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise usage(f"cannot import module {name!r}: {error}", "run from your project's directory") from None
        except Exception as error:  # the module's own code (a syntax error): not "unexpected", not awsworld's
            raise CliError(f"cannot import module {name!r}: {import_failure(error)}",
                           "fix the module and run the command again (--debug shows the traceback)") from error


def _report(results: list[ReplayResult], include_pinned: bool, as_json: bool = False) -> int:
    """Each run's line and a summary (``as_json``: one document, ``_document``); 1 when a run diverged or could
    not be replayed. A pinned run's divergence (``ReplayResult.pinned_divergence``) counts only with
    ``--include-pinned``: pinning is the default, so the running runs of a deployed stack are pinned, and counting
    them made every code change fail a CI check before the deploy, which leaves those runs on their own code."""
    bad = sum(not r.ok for r in results)
    pinned = 0 if include_pinned else sum(r.pinned_divergence for r in results)
    if as_json:
        print_json(_document(results, include_pinned, bad, pinned))
        return 1 if bad - pinned else 0
    for result in results:
        print(result.describe())
    summary = f"{len(results)} run(s) replayed, {bad} diverged or could not be replayed"
    if pinned:
        summary += (f"; {pinned} of them pinned to their deployment, which a deploy leaves on their own code: not "
                    f"counted (--include-pinned counts them)")
    print(summary)
    return 1 if bad - pinned else 0


def _document(results: list[ReplayResult], include_pinned: bool, bad: int, pinned_not_counted: int) -> dict[str, Any]:
    """``replay --json``: each run's outcome (``status`` ``ok``, ``diverged`` or ``error``; where a divergence is
    and what changed; the deployment it is pinned to; ``counted``: whether it makes the exit 1) and the counts the
    summary line says."""
    return {
        "runs": [{"runId": r.run_id, "workflow": r.workflow_name, "status": r.status, "events": r.events,
                  "message": r.message, "position": r.position, "slot": r.slot, "code": r.code, "change": r.change,
                  "pinnedTo": r.pinned, "counted": not r.ok and (include_pinned or not r.pinned_divergence)}
                 for r in results],
        "replayed": len(results), "divergedOrFailed": bad, "pinnedNotCounted": pinned_not_counted,
    }


def _replay(args: argparse.Namespace) -> int:
    from ..client.replay import replay_events

    load_modules(args.module)
    exported = exports(args.file)  # before any replay or connection: a wrong path is the command's mistake
    if not args.run_ids and not args.workflow:
        if not args.file:
            raise usage("name RUN_IDs, --workflow, or --file", "awsworld replay --help")
        return _report([replay_events(events) for events in exported], args.include_pinned, args.json)
    check_run_listing(args.status, args.limit, "name the runs to replay (RUN_ID...), or narrow them with --status")
    return asyncio.run(_replay_stored(args, exported))


def exports(paths: list[str]) -> list[list[Event]]:
    """The runs in each ``--file``, or a usage error naming the file: one that does not exist (it was ``unexpected
    FileNotFoundError``, pointing at ``--debug``), or one that is not what ``awsworld export`` writes."""
    from ..client.replay import load_export

    runs: list[list[Event]] = []
    for path in paths:
        try:
            runs += load_export(path)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as error:
            what = "a folder, not a file" if isinstance(error, IsADirectoryError) else "no such file"
            raise usage(f"--file {path}: {what} (paths are read from {Path.cwd()})",
                        "`awsworld export RUN... -o FILE` writes one") from None
        except ValueError as error:  # not JSON lines, not events (pydantic's ValidationError), not UTF-8
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise usage(f"--file {path} is not a file `awsworld export` wrote: {first}",
                        "`awsworld export RUN... -o FILE` writes one event a line") from None
    return runs


async def _replay_stored(args: argparse.Namespace, exported: list[list[Event]]) -> int:
    from ..authoring.definitions import REGISTRY
    from ..client.replay import replay_events, replay_run

    if args.workflow:  # a name the modules do not register lists no runs: "0 replayed" would pass a CI check
        REGISTRY.workflow(args.workflow)  # WorkflowNotRegisteredError, with the nearest names: exit 2
    async with remote() as client:
        run_ids = list(args.run_ids)
        if args.workflow:
            page = await client.list_runs(workflow=args.workflow, status=args.status or ["running"],
                                          limit=args.limit)
            run_ids += [run.run_id for run in page.data]
        results = [replay_events(events) for events in exported]
        results += [await replay_run(client.world, run_id) for run_id in run_ids]
        return _report(results, args.include_pinned, args.json)


def _export(args: argparse.Namespace) -> int:
    from ..client.replay import export_lines, read_run

    check_config()

    async def lines() -> list[str]:
        async with remote() as client:
            for run_id in args.run_ids:  # an unknown id: one line, before anything is written
                await client.world.runs.get(run_id, resolve_data="none")
            return [line for run_id in args.run_ids for line in export_lines(await read_run(client.world, run_id))]

    found = asyncio.run(lines())
    text = "".join(f"{line}\n" for line in found)
    if args.output:  # (its folder made as needed: the Changing code page's export into a new folder once failed)
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        # The runs' payloads, in the clear (decrypted, on a stack that encrypts them): the file is its owner's
        # alone, 0600 whatever the umask or a file it replaces, as `awsworld dev` keeps its state (cli/dev_state.py).
        descriptor = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(descriptor, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        print(f"{len(found)} event(s) of {len(args.run_ids)} run(s) written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
