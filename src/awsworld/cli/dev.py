"""``awsworld dev MODULE...``: your workflows on the embedded emulator, with the webhook route, until stopped.
Without a MODULE, a TypeScript app's World on a laptop: the queue's deliveries to the app, which ``awsworld serve``
on the export lines serves the World to.

It imports the modules (registering their workflows and steps), provisions a table, bucket and queue on moto
on 127.0.0.1, runs deliveries through the same path the Lambda flow handler runs, and serves the webhook route
(the Lambda webhook handler's logic behind a small HTTP server on 127.0.0.1). It prints ``export`` lines: paste
them into another shell and every ``awsworld`` command (and a ``Client`` built with ``AWSWorld()``) talks to
this environment. They are introduced by a warning, because ``AWS_ENDPOINT_URL`` redirects every AWS tool in
that shell (``sam deploy`` there would talk to 127.0.0.1), and followed by the ``unset`` line that undoes them.
``--state DIR`` keeps runs across restarts (docs/get-started/dev.md says how, and its limits). An edit of your
modules is loaded at once, and no edit destroys a run: each unfinished run is replayed against the new code first,
and one that diverges is parked, not failed (docs/how-to/changing-code.md).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import functools
import gc
import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from ..settings import SETTINGS, Settings

if TYPE_CHECKING:
    from ..local.poller import LocalPoller
    from ..world.protocol import World
    from .dev_state import Snapshots
from . import early_sigterm, ui
from .exit_codes import STOPPED
from .output import import_modules

log = logging.getLogger("awsworld.dev")

DEV_TICK_SECONDS = 10.0
"""How often ``dev`` runs the watchdog (the stack: every minute); locally a tick costs nothing."""
SAY_AFTER_SECONDS = 2.0
"""A wait at start or stop longer than this is said (what dev is doing), so it does not look like a hang."""


def register(sub: Any) -> None:
    dev = sub.add_parser("dev", help="serve your workflows and the webhook route on the embedded emulator",
                         description=__doc__)
    dev.add_argument("modules", nargs="*", metavar="MODULE", help="modules defining your @workflow and @step "
                     "functions (imported from the current directory, or its src/); none for a TypeScript app's "
                     "World: dev then runs the queue's deliveries to the app, and `awsworld serve` in a shell with "
                     "the export lines serves the World to it (docs/how-to/world-over-http.md)")
    dev.add_argument("--state", metavar="DIR",
                     help="keep runs in DIR across restarts (snapshots; see docs/get-started/dev.md)")
    dev.add_argument("--port", type=int, default=0, help="the emulator's port (default: a free one, or the "
                     "one --state used last)")
    dev.add_argument("--webhook-port", type=int, default=0, help="the webhook route's port (default: likewise)")
    dev.add_argument("--sqs-s3", choices=["moto", "localstack"], default="moto", help="the emulator for SQS, S3 "
                     "and KMS: moto (default, in-process) or LocalStack (a second, stricter one; needs "
                     ".venv-localstack, see docs/contributing/emulators.md); DynamoDB stays on moto (--port)")
    dev.add_argument("--no-reload", dest="reload", action="store_false", help="do not load your modules again when "
                     "their files change (default: reload, replaying unfinished runs against the new code first)")
    dev.add_argument("--time-scale", type=_time_scale, metavar="FACTOR", help="run every wait of the runs "
                     "FACTOR times faster: sleeps, hook timeouts, retry back-offs, polls (3600: a 1-day sleep "
                     "takes 24 s); the log records the real times and the factor, so replay agrees. Sets "
                     f"{Settings.time_scale.env}")
    dev.add_argument("--ui", action="store_true", help="serve the web view of runs too (awsworld ui; 127.0.0.1)")
    ui.add_options(dev, port_flag="--ui-port")
    dev.add_argument("--log-format", choices=LOG_FORMATS, default="text",
                     help="how awsworld's log lines print: text (default; a line per record, a failed run as a "
                          "report with its tracebacks) or json (the deployed functions' JSON lines)")
    dev.set_defaults(handler=_main, needs_emulator=True)


def _time_scale(text: str) -> float:
    """``--time-scale``'s factor: ``AWSWORLD_TIME_SCALE``'s own reading (a number of at least 1)."""
    try:
        return Settings.time_scale.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).replace(Settings.time_scale.env, "--time-scale")) from None


def _main(args: argparse.Namespace) -> int:
    ctrl_c = CtrlC.installed()  # first: a press from here on is dev's, whatever runs (see CtrlC)
    args.reload = args.reload and bool(args.modules)  # (no module, no edit to load)
    os.environ.setdefault(Settings.on_divergence.env, "park")  # no edit under dev fails a run (``dev_reload``)
    if args.time_scale is not None:  # read by the worker where it writes a wait (engine.time_scale)
        os.environ[Settings.time_scale.env] = repr(args.time_scale)
    args.modules = import_modules(args.modules)  # (a file's path given for a module: its module's name)
    interrupted = _serve_to_the_end(args, ctrl_c)
    # Everything is saved and closed. What is left is the interpreter's last garbage collection, which walks every
    # object the emulator held (seconds at a few thousand items: 8 of 9.7 s from Ctrl-C to exit here): the process
    # ends, the memory goes with it, so the collection is told to skip them.
    gc.freeze()
    return STOPPED if interrupted else 0


class CtrlC:
    """dev's Ctrl-C, from its command's first line to the process's end: a press is recorded, never lost, and
    answered through the loop; the second raises ``KeyboardInterrupt`` where the main thread is, the third (or a
    timer) ends the process (``dev_loop.on_ctrl_c``, the one handler, set once by ``installed``).

    The first press is answered by what dev is doing: while dev starts (the user's modules import, the emulator
    starts, the state is restored), it cancels the start (the start's task, through the loop: ``start``) and a
    start that swallowed the cancellation ends where it would begin to serve (``serving`` raises
    ``CancelledError``): "stopped", exit 130, the state as it was. Once dev serves, it sets the event that ends
    the serving (dev's way out: the state saved, exit 0). A press before the loop exists (the user's modules import
    on the main thread, ``_main``) is only recorded: the start is undone as soon as it begins.

    SIGTERM is answered the same way (the same handler, the same count of presses): during the start it is a
    Ctrl-C ("stopped", exit 130, the state as it was), once dev serves it ends the serving as a press does.

    Why not Python's default handler until dev serves: it raises ``KeyboardInterrupt`` into whatever frame runs at
    that moment, and where that frame is a ``__del__``, a weakref or GC callback, or code that catches
    ``BaseException``, the exception is printed as "Exception ignored" or swallowed, and dev served on as if no
    Ctrl-C had come (seen once in 40 samples on a loaded machine; a user module whose ``__del__`` runs during its
    import loses it every time: tests/cli/test_dev_ctrl_c_start.py)."""

    def __init__(self) -> None:
        self.pressed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._start: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None

    @classmethod
    def installed(cls) -> CtrlC:
        """A CtrlC whose ``press`` is SIGINT's handler (Python's, run between two bytecodes of the main thread)
        from now on, to the process's end: a second press during dev's way out still ends it
        (``dev_loop.on_ctrl_c``), where the default handler put back would raise into that shutdown."""
        from .dev_loop import on_ctrl_c

        ctrl_c = cls()
        # (a SIGTERM before this line whose ``KeyboardInterrupt`` the frame it landed in swallowed: ``early_sigterm``)
        ctrl_c.pressed = early_sigterm.received
        pressed = on_ctrl_c(ctrl_c.press, held=ctrl_c.held)
        signal.signal(signal.SIGINT, pressed)
        # SIGTERM (a process manager's stop, ``kill``) is a Ctrl-C too until dev serves, when ``serving`` gives it
        # to the loop: with Python's default it ended dev outright during its start, saying nothing, exit -15.
        signal.signal(signal.SIGTERM, pressed)
        return ctrl_c

    def held(self) -> str:
        """What the user's code holds at a first press, for its message (``dev_loop.on_ctrl_c``)."""
        return "dev's event loop" if self._loop is not None else "dev's start"

    def press(self) -> None:
        """The first Ctrl-C: recorded, and answered on the loop if there is one (the signal handler may run in
        the middle of the loop's own code: it only asks, thread-safe)."""
        self.pressed = True
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: dev is past its way out
                self._loop.call_soon_threadsafe(self._answer)

    def _answer(self) -> None:
        if self._stop is not None:
            self._stop.set()
        elif self._start is not None:
            self._start.cancel()

    def start(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[None]) -> None:
        """dev's start runs as ``task`` on ``loop``: a press from now on cancels it, and one before did."""
        self._loop, self._start = loop, task
        if self.pressed:
            task.cancel()

    def serving(self) -> asyncio.Event:
        """The event a press (or SIGTERM) sets to end dev's serving, from now on: taken before the banner says
        "Ctrl-C to stop", so that line is never out before the press does it. On the loop; raises
        ``CancelledError`` if a press came during the start (its cancellation swallowed by a piece of it)."""
        if self.pressed:
            raise asyncio.CancelledError
        self._stop = stop = asyncio.Event()
        with contextlib.suppress(NotImplementedError):  # Windows: no loop signal handlers
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        return stop


def _serve_to_the_end(args: argparse.Namespace, ctrl_c: CtrlC) -> bool:
    """Run ``_serve`` on a loop of its own until its way out has run (the deliveries stopped, the state saved, the
    emulator closed), even when the second Ctrl-C raised ``KeyboardInterrupt`` into the code holding the loop
    (``dev_loop.on_ctrl_c``); True if it did. A Ctrl-C during the start cancels it (``CtrlC``): the
    ``KeyboardInterrupt`` raised here then says "stopped" (exit 130, ``cli.main``).

    Why not ``asyncio.run``: asyncio lets a ``KeyboardInterrupt`` out of the task it ends (a delivery's) and out of
    the loop, and ``asyncio.run`` then cancels every task and returns, ``_serve``'s way out unfinished: the state
    was not saved, the tasks left pending were collected by the interpreter's ending (a page of "Task was destroyed
    but it is pending!"), and their ``finally`` blocks ran there, after the interpreter had stopped the threads
    they wait for: the webhook server's ``shutdown()`` waits for its serving thread, which could then wait for good
    (a ``dev`` still there 60 s after the second Ctrl-C, in CI). Here the loop runs again after each such escape,
    until ``_serve`` ends; the interrupted delivery is cut off, as the way out cuts off one that outlasts its
    grace."""
    with asyncio.Runner() as runner:
        loop = runner.get_loop()
        loop.set_exception_handler(_not_about_ctrl_c)
        serving = loop.create_task(_serve(args, ctrl_c))
        ctrl_c.start(loop, serving)
        interrupted = False
        while True:
            try:
                loop.run_until_complete(serving)
                return interrupted
            except KeyboardInterrupt:  # (one that ends _serve goes on to the CLI: "stopped", exit 130)
                if serving.done():  # out of _serve itself (its start, its way out): what it skipped stays undone
                    raise
                interrupted = True
            except asyncio.CancelledError:  # the start undone by a Ctrl-C (``CtrlC``)
                if ctrl_c.pressed:
                    raise KeyboardInterrupt from None
                raise


def _not_about_ctrl_c(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's handler of what nothing awaited: a task that the second Ctrl-C ended with ``KeyboardInterrupt``
    (a delivery) is the operator's doing, not an error to print with a traceback."""
    if not isinstance(context.get("exception"), KeyboardInterrupt):
        loop.default_exception_handler(context)


def _start_moto(port: int) -> Any:
    """moto on ``port`` if it is free (a restart with --state keeps its address), else on any free port."""
    from ..local import MotoServer

    if port:
        try:
            return MotoServer(port).start()
        except OSError:
            log.warning("port %d is taken: the emulator moves to a free port (export the new settings)", port)
    return MotoServer().start()


async def _serve(args: argparse.Namespace, ctrl_c: CtrlC) -> None:
    from .._published.model import DEV, publish
    from ..authoring.definitions import REGISTRY, Registry
    from ..aws.world import AWSWorld
    from ..client.client import Client
    from ..local import LocalAWS
    from ..local.poller import LocalPoller
    from ..local.server_starts import start_off_the_loop
    from ..schedules.declared import declared_in
    from . import dev_reload, dev_state
    from .dev_code import DevCode
    from .dev_loop import LoopWatch

    state = dev_state.DevState.load(Path(args.state)) if args.state else None
    if state is not None:
        state.hold()  # before the emulator starts: a second dev on this DIR would overwrite its snapshots
    console_logs(args.log_format)
    # (a Ctrl-C or SIGTERM during the emulator's start does not wait for it: ``local/server_starts.py``)
    moto = await start_off_the_loop(functools.partial(_start_moto, args.port or (state.port if state else 0)),
                                    lambda started: started.stop())
    watch = LoopWatch(asyncio.get_running_loop())  # says which line of the user's code blocks the loop
    watch.start()
    try:
        if args.sqs_s3 == "localstack":
            print("starting LocalStack for SQS, S3 and KMS (a few seconds)...", flush=True)
        async with LocalAWS(moto=moto, sqs_s3=args.sqs_s3, initial_world=False) as local:
            config = await local.new_config(state.name if state and state.name else None)
            world = AWSWorld(config)
            world.schedules.declared = declared_in(args.modules)  # dev's ticks fire these on the real clock
            poller: LocalPoller | None = None
            snapshots: Snapshots | None = None
            webhooks: WebhookServer | None = None
            ui_server: Any = ui.build_server(args, world=world) if args.ui else None  # refuses bad flags early
            ui_task: asyncio.Task[None] | None = None
            watcher: asyncio.Task[None] | None = None
            serving = False  # the state is saved on the way out only once it was restored and served
            try:
                restored = await dev_state.restore(world, state.directory, moto.put_items) if state else 0
                if state is not None:
                    snapshots = dev_state.Snapshots(world, state.directory, lambda: moto.changes,
                                                    read_table=moto.read_table)
                    snapshots.restored(restored)
                    await snapshots.start()  # copies on a thread: a step that blocks the loop holds none back
                    moto.keep_first(snapshots.keep)  # a resume is answered once DIR holds its payload
                code = dev_reload.UserCode(args.modules, [Path.cwd()])
                versions = DevCode(world, code.modules)  # runs stay on the code they started on (``dev_code``)
                worker = await versions.first(REGISTRY)
                # Before the first delivery: a Client of this World refuses a name no module here registers.
                await publish(world, worker.registry, host="awsworld dev", ahead=True, key=DEV)
                client = Client(world, registry=worker.registry)
                # Before the first delivery: a step's webhook_url() reads the route's address, as the flow
                # function reads the one the stack gives it.
                webhooks = WebhookServer(world, client, asyncio.get_running_loop(),
                                         args.webhook_port or (state.webhook_port if state else 0))
                os.environ[Settings.webhook_url.env] = webhooks.url
                poller = LocalPoller(world, worker, tick_seconds=DEV_TICK_SECONDS)
                versions.attach(poller.host)
                poller.start()
                # Each unfinished run is replayed against this code before it is woken; one that diverges is parked.
                verdict = None
                if restored:  # a restart with hundreds of unfinished runs takes a while: said, not a hang
                    with _said_if_slow(f"{restored} item(s) restored: replaying the unfinished runs against this "
                                       "code before waking them..."):
                        verdict = await dev_reload.replay_unfinished(world, worker.registry, wake="all",
                                                                     tag=f"restart:{os.getpid()}",
                                                                     pins=versions.pins(), progress=True)
                if state is not None:
                    state.name, state.port, state.webhook_port = config.table_name, moto.port, webhooks.port
                    state.save()
                # A Ctrl-C from here on ends the serving by the way out below (the state saved), before the banner
                # says "Ctrl-C to stop"; one before it undid the start (``CtrlC``).
                stop = ctrl_c.serving()
                _print_banner(config, REGISTRY, webhooks.url, args, state, restored, verdict, worker.deployment)
                if args.reload:
                    async def reloaded(previous: Registry) -> dev_reload.Pins:  # what dev derives, derived again
                        # First, before anything awaits: the code from before goes on running its runs.
                        pins = await versions.reloaded(previous, REGISTRY)
                        world.schedules.declared = declared_in(args.modules)
                        # A Client refuses names no publication has: the new code's names are published at once.
                        await publish(world, REGISTRY, host="awsworld dev", ahead=True, key=DEV)
                        return pins

                    watcher = asyncio.create_task(dev_reload.watch(world, code, REGISTRY, reloaded))
                if ui_server is not None:
                    ui_task = asyncio.create_task(_serve_ui(ui_server, ui.url(args)))
                serving = True
                await stop.wait()
            finally:
                if watcher is not None:
                    watcher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watcher
                if ui_task is not None and ui_server is not None:
                    ui_server.should_exit = True
                    await ui_task
                if webhooks is not None:
                    webhooks.close()
                if poller is not None:
                    await _stop_deliveries(poller)
                if snapshots is not None:
                    moto.keep_first(None)
                    await snapshots.stop()  # (the last copy, below, comes after the deliveries' last writes)
                if serving:  # after the deliveries' last writes, so what they finished is saved
                    if state is not None and snapshots is not None:
                        with _said_if_slow(f"\nsaving the state to {state.directory} ({snapshots.items} items at the "
                                           "last snapshot)..."):
                            copied = await snapshots.save()
                        unchanged = "" if copied else "; unchanged since the last snapshot"
                        print(f"\nstate saved to {state.directory} ({snapshots.items} items{unchanged})")
                    print("stopped", flush=True)
                await world.close()
    finally:
        await asyncio.to_thread(moto.stop)
        watch.stop()


LOG_FORMATS = ("text", "json")
#: The keys of a Powertools record that the text line has already said (or that say nothing in a terminal; the
#: Lambda context keys are those awsworld.lambda_host.observability keeps).
_SAID = frozenset({"level", "location", "message", "timestamp", "service", "name", "xray_trace_id", "exception",
                   "exception_name", "exception_notes", "stack_trace", "cold_start", "function_request_id",
                   "sampling_rate", "taskName"})


def text_line(log: dict[str, Any]) -> str:
    """One record of awsworld's logs as a terminal line: ``01:23:45 WARNING message  (runId=wrun_...)``, its
    traceback under it. The record is the dict Powertools' formatter builds (the keys a deployed function's JSON
    line has), so the ids appended to it (``runId``, ``stepId``, ...) are shown as well."""
    stamp = str(log.get("timestamp", ""))[11:19]
    keys = " ".join(f"{key}={value}" for key, value in log.items() if key not in _SAID)
    line = f"{stamp} {log.get('level', '')!s:<7} {log.get('message', '')}" + (f"  ({keys})" if keys else "")
    exception = log.get("exception")
    return f"{line}\n{exception}" if exception else line


def console_logs(log_format: str) -> None:
    """What dev's terminal shows of awsworld's logs: one format for every line. Importing the Lambda handlers'
    observability gives the ``awsworld`` loggers Powertools' JSON handler, as a deployed function logs; beside
    dev's own text lines that made a mixed console. ``text`` (the default) prints each record with
    :func:`text_line` (the same handler and keys, another rendering: Powertools' formatter stays in place, as
    the handlers append keys to it), and a failed run as a person reads it: what failed, the messages and the
    tracebacks (``AWSWORLD_LOG_ERRORS=full`` unless set otherwise; a deployed function logs only the names).
    ``json`` keeps the deployed functions' JSON lines, failures included, for a log tool. The user's own
    loggers print their step and workflow code's lines at INFO and above, through the same handler
    (``observability.log_every_line_here``)."""
    from .._worker.error_shapes import LOG_ERRORS_ENV, failures
    from ..lambda_host import observability

    os.environ.setdefault(LOG_ERRORS_ENV, "full")
    failures.setLevel(logging.INFO)  # a failed run (WARNING), and each retried step attempt (INFO)
    # Warnings and errors only, from the first delivery on: set once the webhook route was up, the level let a
    # restart's wakes, delivered before it, print an INFO line each ("delivery handled") that nothing else prints.
    observability.logger.setLevel(logging.WARNING)
    # The user's own lines from step and workflow code (``log.info`` in a step), with the run and step they came
    # from, in the same rendering; the root had no handler, and Python printed only their warnings, bare.
    observability.log_every_line_here(logging.INFO)
    if log_format == "json":
        return
    observability.logger.registered_formatter.json_serializer = text_line  # type: ignore[attr-defined]
    report = logging.StreamHandler(sys.stdout)
    report.setFormatter(logging.Formatter("%(message)s"))  # the failure report is its own text, lines and all
    failures.handlers, failures.propagate = [report], False


async def _serve_ui(server: Any, url: str) -> None:
    """``dev --ui``: the UI next to dev, on dev's World and loop; a port already taken costs the UI, not dev
    (uvicorn exits the process when it cannot bind)."""
    task = asyncio.create_task(server.serve())  # built with signals=False: Ctrl-C stays dev's
    while not server.started and not task.done():  # noqa: ASYNC110 (uvicorn offers a flag, no event)
        await asyncio.sleep(0.05)
    if server.started:
        print(f"ui: {url}", flush=True)
    try:
        await task
    except SystemExit:
        print(f"ui: could not serve on {url} (is the port taken? --ui-port N)", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _said_if_slow(text: str) -> Iterator[None]:
    """Print ``text`` if the block is still running after ``SAY_AFTER_SECONDS``."""
    slow = asyncio.get_running_loop().call_later(SAY_AFTER_SECONDS, lambda: print(text, flush=True))
    try:
        yield
    finally:
        slow.cancel()


async def _stop_deliveries(poller: LocalPoller) -> None:
    """Stop receiving; the deliveries still running get ``SHUTDOWN_GRACE_SECONDS`` to end (a step that ends
    meanwhile keeps its outcome), said first, so a wait at Ctrl-C is not a hang. What is still running then is
    cancelled, as a Lambda timeout cuts a delivery off: its step runs again as its next attempt."""
    from .._worker.invoker import SHUTDOWN_GRACE_SECONDS  # (imported with the poller: not at the CLI's start)

    running = poller.running
    if running:
        print(f"\nwaiting up to {SHUTDOWN_GRACE_SECONDS:g} s for {running} deliver{'y' if running == 1 else 'ies'} "
              "still running (what does not end by then runs again as its next attempt)", flush=True)
    await poller.stop()


def environment(config: Any, webhook_url: str) -> dict[str, str]:
    """What a shell needs to point awsworld (the CLI or ``AWSWorld()``) at this environment."""
    from ..local import DUMMY_CREDENTIALS, REGION
    env = {"AWS_ENDPOINT_URL": config.endpoint_url, Settings.table.env: config.table_name,
           Settings.bucket.env: config.bucket_name, Settings.queue_url.env: config.queue_url or "",
           Settings.dlq_url.env: config.dlq_url or "", Settings.webhook_url.env: webhook_url,
           "AWS_ACCESS_KEY_ID": str(DUMMY_CREDENTIALS["aws_access_key_id"]),
           "AWS_SECRET_ACCESS_KEY": str(DUMMY_CREDENTIALS["aws_secret_access_key"]), "AWS_REGION": REGION,
           "AWS_DEFAULT_REGION": REGION}  # (boto3 reads this one: a user's boto3 code in that shell needs it too)
    if config.dynamodb_endpoint_url and config.dynamodb_endpoint_url != config.endpoint_url:
        env["AWS_ENDPOINT_URL_DYNAMODB"] = config.dynamodb_endpoint_url
    return env


# Comments, so pasting them with the export lines is harmless. The unset line stands apart from the exports (a
# blank line and this comment between them), so a selection of the export block does not sweep it in.
EXPORT_WARNING = """\
# point awsworld at this environment: paste the export lines below into another shell.
# WARNING: they redirect every AWS tool in that shell, not only awsworld: AWS_ENDPOINT_URL sends the AWS CLI,
# `sam deploy` and any boto3 code there to this emulator on 127.0.0.1, and the dummy credentials replace yours.
# Give them a shell of their own; the unset line below undoes them.
"""
UNDO_COMMENT = "# undo them in that shell (credentials and region then come from your AWS profile again):"


def _divergence_line(*, checked: bool) -> str:
    """What becomes of a run whose replay diverges, under the setting in force: ``dev`` parks it unless
    ``AWSWORLD_ON_DIVERGENCE`` is set otherwise, and the banner said "parked, not failed" under ``fail`` too. Under
    ``fail`` the run's next delivery fails it; the replay of unfinished runs after an edit or a restart
    (``dev_reload.replay_unfinished``, ``checked``) still parks the runs it finds diverging."""
    env = Settings.on_divergence.env
    if SETTINGS.on_divergence == "park":
        return f"a run whose replay diverges from its log is parked, not failed ({env}=park)"
    return (f"a run whose replay diverges from its log fails at its next delivery ({env}=fail; unset it to park "
            "such a run instead)" + ("; the replay of unfinished runs after an edit or a restart parks those it "
                                     "finds diverging" if checked else ""))


def _print_banner(config: Any, registry: Any, webhook_url: str, args: argparse.Namespace, state: Any,
                  restored: int, verdict: Any, deployment: str | None) -> None:
    print(f"awsworld dev: {len(registry.workflows)} workflow(s), {len(registry.steps)} step(s) loaded, as "
          f"deployment {deployment} (a run stays on the code it started on: `awsworld deployments`)")
    from ..schedules.declared import declared_in

    fires: dict[str, list[str]] = {}  # the schedules dev fires, beside their workflow: picked up, and when
    for declared in declared_in(args.modules or ()):
        fires.setdefault(declared.workflow_name, []).append(
            f"schedule {declared.schedule_id}: {declared.schedule.spec().describe()}")
    for name in sorted(registry.workflows):
        print(f"  workflow {name}" + "".join(f"  {text}" for text in fires.get(name, [])))
    if not args.modules:
        print("no modules: dev runs the queue's deliveries (a TypeScript app's pushed messages); `awsworld serve` in a "
              "shell with the export lines below serves this World to the app (packages/world-awsworld)")
    if state is not None:
        woken, parked = (len(verdict.woken), len(verdict.parked)) if verdict is not None else (0, 0)
        sdk = len(verdict.sdk) if verdict is not None else 0
        cancelled = len(verdict.cancelled) if verdict is not None else 0
        print(f"state in {state.directory}: {restored} item(s) restored, {woken} unfinished run(s) woken"
              + (f", {parked} parked (`awsworld runs --parked`)" if parked else "")
              + (f", {cancelled} child run(s) of a cancelled parent cancelled (the stop had cut its cancel short)"
                 if cancelled else "")
              + (f", {sdk} of the Workflow SDK's TypeScript runtime left to its app" if sdk else ""))
    else:  # said up front: the runs of a session are lost at Ctrl-C, which a reader of the exports may not expect
        print("runs live in memory only: they end with this process (--state DIR keeps them across restarts)")
    print(("edits of your modules are loaded as you save them; " if args.reload else "") + _divergence_line(
        checked=bool(args.reload or state is not None)))
    factor = Settings().time_scale
    if factor != 1:
        print(f"time scale {factor:g}: every wait runs {factor:g} times faster (a 1-day sleep takes "
              f"{86400 / factor:g} s); the log records the real times")
    env = environment(config, webhook_url)
    if args.modules:
        env[Settings.modules.env] = ",".join(args.modules)
    print()
    print(EXPORT_WARNING, end="")
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}")
    print(f"\n{UNDO_COMMENT}\nunset {' '.join(env)}")
    print(f"\nwebhooks: POST {webhook_url}/webhooks/<token>   (`awsworld hooks RUN` prints each webhook's URL)")
    print("serving deliveries; Ctrl-C to stop", flush=True)


class WebhookServer:
    """The webhook route on 127.0.0.1: each request becomes the Function URL event Lambda would send, and
    goes through the deployed handler's own parsing and resume logic (``lambda_host.webhook``), on the loop that
    owns the World; answers are the deployed route's (202, 404, 410, ...)."""

    def __init__(self, world: World, client: Any, loop: asyncio.AbstractEventLoop, port: int = 0) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # (ssl, email: not at the CLI's start)

        from ..lambda_host import observability
        from ..lambda_host import webhook as route

        observability.logger.setLevel(logging.WARNING)  # the deployed route logs each request as JSON: not here
        container = _Container(world, client)

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                event = _function_url_event(self.command, self.path, dict(self.headers.items()), body)
                request = route.parse(event)
                if isinstance(request, route.Response):
                    response = request
                else:
                    future = asyncio.run_coroutine_threadsafe(route.resume(container, request), loop)
                    try:  # (a manual webhook's answer is awaited for AWSWORLD_WEBHOOK_RESPONSE_SECONDS first)
                        response = future.result(timeout=60 + SETTINGS.webhook_response_seconds)
                    except Exception as error:
                        log.warning("webhook failed: %s", type(error).__name__)
                        response = route.Response(500, {"status": "error", "detail": "try again"})
                status, headers, data = response.http()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":  # a HEAD answer has headers only
                    self.wfile.write(data)

            # Every method reaches the route, as on the Function URL: one it does not take (HEAD, OPTIONS: a
            # sender's probe) is answered 405 with `allow`, as on AWS, not http.server's 501 HTML page.
            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle

            def log_message(self, format: str, *args: Any) -> None:
                log.debug(format, *args)

        try:
            self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        except OSError:
            if not port:
                raise
            log.warning("webhook port %d is taken: using a free one", port)
            self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        from .._http.loopback import SHUTDOWN_POLL_SECONDS
        self.thread = threading.Thread(target=self.server.serve_forever, args=(SHUTDOWN_POLL_SECONDS,),
                                       name="awsworld-webhooks", daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class _Container:
    """What the webhook route reads from its Lambda container: the World and a Client on it."""

    def __init__(self, world: World, client: Any) -> None:
        self.world = world
        self.client = client


def _function_url_event(method: str, path: str, headers: dict[str, str], body: bytes | None) -> dict[str, Any]:
    """The event a Lambda Function URL (payload format 2.0) delivers for this request: bodies base64-encoded,
    as Function URLs do for anything they do not take for text, so the route decodes them as deployed."""
    parts = urlsplit(path)
    event: dict[str, Any] = {
        "rawPath": parts.path,
        "requestContext": {"http": {"method": method, "path": parts.path}},
        "headers": {k.lower(): v for k, v in headers.items()},
        "queryStringParameters": dict(parse_qsl(parts.query)) or None,
    }
    if body is not None:
        event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
    return event

