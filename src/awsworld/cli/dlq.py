"""``awsworld dlq``: what the dead-letter queue holds and why, and ``awsworld dlq redrive`` to send it back to the
flow queue once the cause is fixed, on ``awsworld dev`` or a deployed stack (``client.dead_letters``).

    awsworld dlq [--max N]          # one line a message (the first 100 unless N): id, first send, receives, run,
                                    # kind, the reason; and how many more the DLQ holds when it holds more
    awsworld dlq --json             # the same, for scripts (the count of the rest on stderr)
    awsworld dlq redrive [--max N]  # move them (or N of them) back to the flow queue; prints how many moved

Listing takes nothing out (each message is hidden for a moment while the list is read, then shown again). A message
shows its ids and the reason, never its payload. The DLQ is ``AWSWORLD_DLQ_URL`` (the stack's ``ClientEnvironment``
output; ``awsworld dev`` exports it). Exit codes: 0 done (an empty DLQ too), 1 a message could not be sent back
(it stays in the DLQ), 2 no DLQ or flow queue set.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC
from typing import TYPE_CHECKING, Any

from ..settings import SETTINGS, Settings
from .errors import CliError, usage
from .output import print_json, print_table, remote

if TYPE_CHECKING:
    from ..aws.queue.dead_letter_queue import Redriven
    from ..client.dead_letters import DeadLetter, DeadLetters
    from ..world.protocol import World


LIST_MAX = 100
"""How many messages ``awsworld dlq`` lists unless ``--max`` says: a screen's worth, read in a few seconds (each
receive hides what it read for ``HIDE_SECONDS``, so a list far longer than one peek can read is cut there)."""


def register(sub: Any) -> None:
    read = argparse.ArgumentParser(add_help=False)
    read.add_argument("--json", action="store_true", help="print JSON for scripts (stable keys)")
    listing = argparse.ArgumentParser(add_help=False, parents=[read])
    listing.add_argument("--max", type=_positive, metavar="N", default=LIST_MAX,
                         help=f"list at most N (default: {LIST_MAX}); the rest is counted, not listed")
    group = sub.add_parser("dlq", parents=[listing], help="the dead-letter queue: what it holds and why; redrive it",
                           description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group.set_defaults(handler=_list)
    commands = group.add_subparsers(dest="dlq_command", metavar="SUBCOMMAND")
    commands.add_parser("list", parents=[listing], help="each message's ids, run, kind and reason (the default)") \
        .set_defaults(handler=_list)
    redrive = commands.add_parser(
        "redrive", parents=[read], help="move the messages back to the flow queue",
        description="Move the dead-letter queue's messages back to the flow queue, once their cause is fixed: each is "
        "sent with its body and message attributes, then deleted from the DLQ. A crash between the two leaves a "
        "duplicate, which deliveries absorb as they absorb a redelivery; a message that still cannot succeed comes "
        "back to the DLQ with its reason (`awsworld dlq` shows it).")
    redrive.add_argument("--max", type=_positive, metavar="N", help="move at most N (default: all)")
    redrive.set_defaults(handler=_redrive)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of 1 or more, got {text!r}")
    return int(text)


def _letters(world: World) -> DeadLetters:
    """The DLQ of the stack ``remote()`` opened (an ``AWSWorld``: only AWS has a dead-letter queue)."""
    from ..aws import AWSWorld
    from ..client.dead_letters import DeadLetters

    assert isinstance(world, AWSWorld)
    return DeadLetters(world)


def _needs(*variables: tuple[Any, str]) -> None:
    """Refuse before connecting when a queue the command needs is not set, naming the variable."""
    for var, what in variables:
        if getattr(SETTINGS, var.name) is None:
            raise usage(f"{var.env} is not set: the CLI does not know which queue is the {what}",
                        "set it from your stack's ClientEnvironment output (`awsworld dev` exports it)")


DLQ = (Settings.dlq_url, "dead-letter queue")
QUEUE = (Settings.queue_url, "flow queue")


def _list(args: argparse.Namespace) -> int:
    _needs(DLQ)

    async def go() -> tuple[list[DeadLetter], int]:
        async with remote() as client:
            letters = _letters(client.world)
            listed = await letters.list(args.max)
            return listed, await letters.held() if listed else 0  # a peek cut short is told too

    letters, held = asyncio.run(go())
    rest = None
    if held > len(letters):  # the count is SQS's approximate one: "about"
        rest = f"{len(letters)} listed of about {held} in the dead-letter queue" + (
            f" (`--max {held}` lists more)" if len(letters) >= args.max else "")
    if args.json:
        print_json([letter.to_json() for letter in letters])
        if rest is not None:  # stdout stays the list a script parses
            print(rest, file=sys.stderr)
        return 0
    if not letters:  # on stderr, as `runs` says "no runs": stdout holds what was found
        print("the dead-letter queue is empty", file=sys.stderr)
        return 0
    print_table(("MESSAGE", "FIRST SENT (UTC)", "RECEIVES", "RUN", "KIND", "REASON"), [
        (letter.message_id or letter.sqs_message_id,
         f"{letter.first_sent.astimezone(UTC):%Y-%m-%d %H:%M:%S}" if letter.first_sent else "-",
         "-" if letter.receives is None else str(letter.receives), letter.run_id or "-",
         f"step {letter.step_id}" if letter.kind == "step" and letter.step_id else letter.kind, letter.reason)
        for letter in letters])
    print(rest or f"{len(letters)} message(s)", end="; ")
    print("`awsworld dlq redrive` sends them back to the flow queue once the cause is fixed")
    return 0


def _redrive(args: argparse.Namespace) -> int:
    _needs(DLQ, QUEUE)

    async def go() -> Redriven:
        async with remote() as client:
            return await _letters(client.world).redrive(args.max)

    done = asyncio.run(go())
    if args.json:
        print_json({"moved": done.moved, "failed": [{"sqsMessageId": i, "code": c} for i, c in done.failed]})
    else:
        print(f"moved {done.moved} message(s) to the flow queue")
    if done.failed:
        raise CliError(f"{len(done.failed)} message(s) could not be sent back: "
                       + ", ".join(f"{i} ({c})" for i, c in done.failed), "run `awsworld dlq redrive` again")
    return 0
