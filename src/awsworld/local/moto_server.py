"""moto's AWS emulator as an in-process HTTP server on loopback.

Like moto's ``ThreadedMotoServer``, with four differences: it binds 127.0.0.1 on a free port, it answers only this
machine's programs (``LoopbackOnly``: not a web page through DNS rebinding or a cross-site request), it logs no
requests, and it serializes DynamoDB. moto's DynamoDB backend is not safe under concurrent requests (two
transactions racing for one event slot can both succeed), so every request whose ``X-Amz-Target`` is a
DynamoDB operation runs under one lock; S3 and SQS stay concurrent. It counts the requests that may change what
it stores (``changes``), so ``awsworld dev --state`` copies the table only when something changed
(``cli/dev_state.py``). It also installs the journaling
``TransactWriteItems`` and the partition-only ``Query`` (see ``moto_patch``) so transactions and reads stay fast
as the table fills, and skips work moto repeats on every request with the same answer (``moto_speedups``).
"""

from __future__ import annotations

import base64
import collections
import contextlib
import io
import json
import logging
import re
import threading
import zlib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from .._http.loopback import EMULATOR_REFUSAL, SHUTDOWN_POLL_SECONDS, from_this_machine
from ..durable.hook_payloads import HEARTBEAT_FIELD
from . import moto_patch, moto_speedups

log = logging.getLogger("awsworld.local.moto")

HOST = "127.0.0.1"

T = TypeVar("T")
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


#: DynamoDB operations that change nothing stored (``Describe*`` and ``List*`` too): any other request counts as a
#: change, so a request this set does not know is a copy too many, never a change missed.
DYNAMODB_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class FairLock:
    """A lock taken in the order it was asked for: its holder hands it to the longest waiter. ``threading.Lock``
    is not fair: a thread that releases it and asks again at once (one of the 32 marker writes a flow sends at a
    time, say) most often takes it back before the threads already waiting wake, so under a burst a request could
    wait for many that came after it. Under ``awsworld dev`` after ``kill -9`` in a 1,000-step fan-out, the
    restart's flow queues the 960 steps not ended (a claim and a confirmation of each message's key), and a step
    result's commit waited 14 s for the lock meanwhile, the run's results landing together at the end."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._waiters: collections.deque[threading.Lock] = collections.deque()
        self._held = False

    def acquire(self) -> None:
        with self._mutex:
            if not self._held:
                self._held = True
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        turn.acquire()  # released by the holder, which hands the lock over (``_held`` stays True)

    def release(self) -> None:
        with self._mutex:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._held = False

    def __enter__(self) -> FairLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class SerializedDynamoDB:
    """WSGI middleware: one DynamoDB request at a time (in the order they came: ``FairLock``), everything else
    concurrently; and a count of the requests that may have changed the table or the bucket (``changes``: any request
    that is neither a read nor SQS's, whose messages no snapshot keeps)."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self.lock = FairLock()
        self.changes = 0
        self.keep: Callable[[], None] | None = None
        """Called after a write that records a hook's payload succeeded, before its answer leaves (``dev
        --state``'s ``Snapshots.keep``): see ``kept_first``."""

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        changes = _may_change(environ.get("REQUEST_METHOD", ""), target)
        keep = self.keep if changes and target.startswith("DynamoDB_") and self.keep is not None else None
        if keep is not None and not kept_first(environ):
            keep = None
        answered: list[str] = []

        def started(status: str, *rest: Any) -> Any:
            answered.append(status)
            return start_response(status, *rest)

        try:
            if not target.startswith("DynamoDB_"):
                return self.app(environ, start_response)
            with self.lock:
                result = self.app(environ, started)
                try:
                    # Produce the whole body under the lock: a lazy body must not read state after release.
                    return [b"".join(result)]
                finally:
                    close = getattr(result, "close", None)
                    if close is not None:
                        close()
        finally:
            # Counted once the request is done: a copy that reads the count and then the table either sees this
            # write or reads a count that the next look finds changed.
            if changes:
                self.changes += 1
            # (Out of the lock, which the copy takes to read the table; the answer waits for it.)
            if keep is not None and answered and answered[0].startswith("200"):
                keep()


KEPT_FIRST = b"hook_received"
"""What a DynamoDB write carries when it records a hook's payload (its event's type, in the event item's JSON)."""
HEARTBEAT_MARK = re.compile(rb'"' + HEARTBEAT_FIELD.encode() + rb'\\*":\s*true')
"""The words of a heartbeat's mark in its ``hook_received``'s data (``durable/hook_payloads.py``), as the event
item's JSON holds it inside the request's (its quotes escaped): outside the payload, so an encrypted payload keeps
it. Only a look before ``_event_blocks``: a payload may hold the same words (``{"heartbeat": true}``)."""
BINARY_ATTRIBUTE = b'"B"'
"""What a DynamoDB request's JSON holds when it writes a binary attribute: an event block over ``COMPRESS_OVER``
bytes is one, zlib-compressed (``aws/log/blocks.py``), with ``hook_received`` in it unreadable as it is."""


def _event_blocks(body: bytes) -> tuple[list[str], list[str]]:
    """The event blocks this DynamoDB request writes, as their JSON text (``aws/log/blocks.py``): those kept as text
    (a string attribute holding a list of records) and those compressed (a binary attribute that zlib opens)."""
    try:
        request = json.loads(body)
    except ValueError:
        return [], []
    plain: list[str] = []
    opened: list[str] = []
    pending: list[object] = [request]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            attribute = cast("dict[str, object]", node)
            text, packed = attribute.get("S"), attribute.get("B")
            if isinstance(text, str) and text.startswith("[{"):
                plain.append(text)
            elif isinstance(packed, str):
                with contextlib.suppress(ValueError, zlib.error, UnicodeDecodeError):  # (not a block)
                    opened.append(zlib.decompress(base64.b64decode(packed, validate=True)).decode("utf-8"))
            pending.extend(attribute.values())
        elif isinstance(node, list):
            pending.extend(cast("list[object]", node))
    return plain, opened


def _marked_records(text: str) -> int:
    """The ``hook_received`` records of an event block's text whose data (``"d"``, not the payload ``"p"``, which a
    sender fills) marks a heartbeat."""
    try:
        records = json.loads(text)
    except ValueError:
        return 0
    if not isinstance(records, list):
        return 0
    marked = 0
    for record in cast("list[object]", records):
        if isinstance(record, dict):
            fields = cast("dict[str, object]", record)
            data = fields.get("d")
            if fields.get("t") == KEPT_FIRST.decode() and isinstance(data, dict) \
                    and cast("dict[str, object]", data).get(HEARTBEAT_FIELD) is True:
                marked += 1
    return marked


def kept_first(environ: dict[str, Any]) -> bool:
    """Whether this DynamoDB write records a hook's payload (a resume, a webhook's, a fail), whose answer
    ``awsworld dev --state`` holds back until the state holding it is copied: an answered ``delivered`` is then
    never lost to a ``kill -9`` (the copies every 5 s would lose up to 5 s of them, and the sender, told
    "delivered", has no reason to send again). Reads the request's body, and puts it back for moto. A user value
    that holds the words (a step's result, say) costs a copy too many, never a payload kept late.

    Not a heartbeat's (a ``hook_received`` marked ``heartbeat``: as many marks as ``hook_received`` in the write):
    its sender sends the next one anyway, and one lost with the last 5 s of a crash only moves the hook's
    heartbeat deadline back by one interval; the periodic copy still saves it. Copying for each made a run
    waiting on a heartbeated hook cost a whole copy of the table per heartbeat, each held before its answer."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    # Counted in the request's bytes and in its compressed blocks: a user value holding the words counts too (a copy
    # too many at most); heartbeats only by their records' marks.
    received = body.count(KEPT_FIRST)
    heartbeat_words = HEARTBEAT_MARK.search(body) is not None
    if BINARY_ATTRIBUTE not in body and (received == 0 or not heartbeat_words):
        return received > 0
    plain, opened = _event_blocks(body)
    received += sum(text.count(KEPT_FIRST.decode()) for text in opened)
    return received > sum(_marked_records(text) for text in plain + opened)


class LoopbackOnly:
    """WSGI middleware: a 403 for a request addressed to a name that is not loopback or sent by a page of another
    origin (``_http/loopback.py``), before moto reads it.

    moto checks no credentials and echoes any ``Origin`` in its CORS header, so the emulator's table and bucket (under
    ``awsworld dev``, every run's arguments, results and payloads, in the clear) were readable by any web page open
    on the machine that found its port: a page of ``evil.example`` whose name its DNS then points at 127.0.0.1 reads
    the emulator as its own origin (a Scan came back with ``Access-Control-Allow-Origin`` echoing the page's). The
    SDKs and the AWS CLI send neither a foreign ``Host`` nor an ``Origin``."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if from_this_machine(environ.get("HTTP_HOST", ""), environ.get("HTTP_ORIGIN")):
            return self.app(environ, start_response)
        body = EMULATOR_REFUSAL.encode()
        start_response("403 Forbidden", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]


def _may_change(method: str, target: str) -> bool:
    if method in READ_METHODS or target.startswith("AmazonSQS."):
        return False
    operation = target.partition(".")[2] if target.startswith("DynamoDB_") else ""
    return not (operation in DYNAMODB_READS or operation.startswith(("Describe", "List")))


class MotoServer:
    """``start()`` / ``stop()`` an embedded moto server; ``endpoint_url`` once started."""

    def __init__(self, port: int = 0) -> None:
        self._requested_port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._app: SerializedDynamoDB | None = None

    @property
    def changes(self) -> int:
        """How many requests so far may have changed what the server stores (it only grows): equal counts at two
        moments mean the table and the bucket are as they were."""
        return self._app.changes if self._app is not None else 0

    def keep_first(self, keep: Callable[[], None] | None) -> None:
        """Call ``keep`` after each write that records a hook's payload, before its answer (``SerializedDynamoDB``'s
        ``keep``); None stops it."""
        if self._app is None:
            raise RuntimeError("the moto server is not running: call start() first")
        self._app.keep = keep

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the moto server is not running: call start() first")
        return int(self._server.server_address[1])

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def read_table(self, table_name: str, read: Callable[[Iterable[dict[str, Any]]], T]) -> T:
        """``read`` over every item of ``table_name`` as a Scan answers it (DynamoDB's JSON, binary values as
        bytes: moto's ``dynamo_to_dict``, which its Scan serializes), called in this process while no DynamoDB
        request runs, so it sees one moment of the table. ``awsworld dev --state`` copies the table this way: a
        Scan over HTTP took 10.6 s for 10,000 items of 1.5 KB on a loaded machine, this 0.16 s, and every
        DynamoDB request waited on each page of the Scan."""
        from moto.dynamodb.models.utilities import dynamo_to_dict

        if self._app is None:
            raise RuntimeError("the moto server is not running: call start() first")
        with self._app.lock:
            return read(dynamo_to_dict(item.attrs) for item in moto_patch.table_items(moto_table(table_name)))

    def put_items(self, table_name: str, items: Iterable[dict[str, Any]]) -> None:
        """Put ``items`` (DynamoDB's JSON, binary values as bytes, as ``read_table`` gives them) into ``table_name``
        in this process while no DynamoDB request runs: ``read_table``'s counterpart, for ``awsworld dev --state``'s
        restore (BatchWriteItem over HTTP took 10 s for 16,500 items here). Counted as a change (``changes``)."""
        if self._app is None:
            raise RuntimeError("the moto server is not running: call start() first")
        with self._app.lock:
            table = moto_table(table_name)
            for item in items:
                table.put_item(item)
            self._app.changes += 1

    def start(self) -> MotoServer:
        if self._server is not None:
            return self
        # Imported here: importing moto's server pulls in every backend, which takes a moment.
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        class QuietRequestHandler(MotoRequestHandler):
            def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                pass

            def log(self, type: str, message: str, *args: Any) -> None:
                log.debug("%s " + message, self.address_string(), *args)

        moto_patch.install()
        moto_speedups.install()
        app = self._app = SerializedDynamoDB(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(HOST, self._requested_port, LoopbackOnly(app), threaded=True,
                                   request_handler=QuietRequestHandler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(SHUTDOWN_POLL_SECONDS,),
                                        name="awsworld-moto", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=10)

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def moto_table(table_name: str) -> Any:
    """moto's in-process ``Table`` object called ``table_name`` (in any account and region), for tests and
    benchmarks that inspect it or fill it directly."""
    from moto.dynamodb.models import dynamodb_backends

    for account in list(dynamodb_backends.values()):
        for backend in list(account.values()):
            table = backend.tables.get(table_name)
            if table is not None:
                return table
    raise KeyError(f"moto has no DynamoDB table {table_name!r}")
