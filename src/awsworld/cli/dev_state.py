"""``awsworld dev --state DIR``: the emulator's runs kept across restarts, by snapshots of our own.

moto's server keeps everything in memory and has no persistence, so ``dev`` saves what awsworld stored itself:
every item of the table (a Scan, in DynamoDB's JSON with binary values base64-encoded) and every object of the
bucket (large values, stream segments), written to DIR every few seconds and once more on a clean stop, each
file replaced atomically, and only when the emulator counted a change since the last copy (``Snapshots``). On
the next start with the same DIR, ``dev`` provisions resources with the same names
(and, if it is free, on the same port, so the exported settings stay valid), loads the snapshot back, and
wakes every run that had not finished.

Limits, said plainly: the queue is not saved (its messages are wakes, and the runtime rebuilds what they stood
for when a run is woken: a durable sleep that fell due meanwhile ends at once); a crash (not Ctrl-C) loses the
writes since the last snapshot (``SNAPSHOT_SECONDS``, or longer for a table that takes long to copy: see
``Snapshots.interval``), so a step may run again, as it may after any crash; snapshots copy the whole table, which
suits a development machine, not a large data set. Except a hook's payload: a write that records one (``awsworld
resume``, a webhook's request) is answered only once a copy holds it (``Snapshots.keep``), because its sender,
told "delivered", has no reason to send it again, where a lost step result is made again by the step.

What a restore changes, because the process that held it is gone: the queue's dedup markers are not loaded
(they name messages that no longer exist, and would hold their keys back for days), and every step that was
running gets its lease ended (``world.rules.leases``): its delivery died with the old process, so the first flow of
its run takes it over as a new attempt instead of waiting for a lease that nobody will finish. Its body ran
(at least partly) once already: a step is at-least-once. And a rate limit's buckets forget the starts reserved for
after the restore (``world.rules.limiters.reservations_lost``): their messages were in the queue, and each of those
steps reserves again when its run is woken, which would otherwise put it behind its own lost reservation.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import hashlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..aws.keys import RUN_SK, STEP_PREFIX
from ..aws.limiter_store import PARTITION_PREFIX, POOL_PREFIX, RESERVED_PREFIX, decode_pool, encode_pool
from ..aws.log.transitions import INLINE_STEP
from ..world.rules.leases import LEASE_UNTIL_FIELD
from ..world.rules.limiters import reservations_lost

if TYPE_CHECKING:
    from ..aws.config import AWSConfig
    from ..aws.world import AWSWorld

log = logging.getLogger("awsworld.dev")

DEDUP_PREFIX = "DEDUP#"

SNAPSHOT_SECONDS = 5.0
SNAPSHOT_SHARE = 0.2
"""At most this share of ``dev``'s time goes to copying the table: copies that took 3 s wait 15 s for the next."""
KEEP_SECONDS = 1.0
"""``Snapshots.keep`` copies before a resume's answer only while a copy takes at most this long (the quickest of the
last ``COPY_TIMES_KEPT``): about 15,000 items on a 2-core machine."""
COPY_TIMES_KEPT = 3
"""How many copies' times ``Snapshots.interval`` judges copying by (the quickest of them)."""
STATE_FILE = "state.json"
LOCK_FILE = "dev.lock"
TABLE_FILE = "table.jsonl"
OBJECTS_DIR = "objects"
MANIFEST_FILE = "objects.json"
PRIVATE_DIRECTORY = 0o700
PRIVATE_FILE = 0o600
"""DIR holds the runs' payloads (arguments, results, hook payloads, stream chunks, in the clear: the emulator has no
encryption key), so it is its owner's alone, as ``~/.ssh`` is: other users of the machine can neither list it nor
read a snapshot, whatever the umask."""


@dataclass
class DevState:
    """Where a ``dev`` environment lives between restarts: its resource name and the ports it served on."""

    directory: Path
    name: str | None = None
    port: int = 0
    webhook_port: int = 0
    _held: Any = field(default=None, repr=False, compare=False)  # the open lock file, while this process holds DIR

    @classmethod
    def load(cls, directory: Path) -> DevState:
        _private_directory(directory, parents=True)
        path = directory / STATE_FILE
        if not path.exists():
            return cls(directory)
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(directory, data.get("name"), int(data.get("port", 0)), int(data.get("webhookPort", 0)))

    def hold(self) -> None:
        """Hold the directory for this process, or refuse in one line naming the ``dev`` that holds it. Without the
        lock a second ``dev`` on one DIR failed because the emulator's port was taken, naming neither; on a port of
        its own it would restore the same snapshot and then overwrite the first one's every few seconds, so whichever
        wrote last would be all that is kept. The lock is the operating system's (``flock``, held as long as the
        file is open): it ends with the process however that ends, so a crash leaves nothing to clean up. (No lock
        on Windows, which has no ``flock``.)"""
        if sys.platform == "win32":
            return
        import fcntl

        from .errors import usage

        descriptor = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_APPEND, PRIVATE_FILE)
        handle = open(descriptor, "a+", encoding="utf-8")  # noqa: SIM115 (held until exit)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise usage(f"another awsworld dev (pid {holder}) is using --state {self.directory}",
                        "stop it first, or give this one a --state of its own") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._held = handle

    def save(self) -> None:
        _write_atomic(self.directory / STATE_FILE, json.dumps(
            {"name": self.name, "port": self.port, "webhookPort": self.webhook_port}, indent=2).encode())


def _private_directory(directory: Path, *, parents: bool = False) -> None:
    """``directory``, made if missing, readable by its owner only (``PRIVATE_DIRECTORY``). One made by an older
    ``dev`` or by hand (0755 under the usual umask) is tightened too, since it holds snapshots written before; one
    this user may write into but not chmod (a shared folder) keeps its mode, its files being private anyway."""
    directory.mkdir(mode=PRIVATE_DIRECTORY, parents=parents, exist_ok=True)
    if sys.platform != "win32":
        with contextlib.suppress(OSError):
            os.chmod(directory, PRIVATE_DIRECTORY)


def _write_atomic(path: Path, data: bytes) -> None:
    """Write to a sibling file, then rename over ``path``: a crash mid-write leaves the previous snapshot. The file
    is its owner's alone from its creation (``PRIVATE_FILE``; a leftover ``.tmp`` of a crash is narrowed first), so
    no moment exists in which another user could read it."""
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    with open(descriptor, "wb") as file:
        if sys.platform != "win32":
            os.fchmod(file.fileno(), PRIVATE_FILE)
        file.write(data)
    os.replace(temporary, path)


def encode_value(value: dict[str, Any]) -> dict[str, Any]:
    """A low-level DynamoDB attribute value as JSON: ``B``/``BS`` bytes become base64 text."""
    (kind, inner), = value.items()
    if kind == "B":
        return {"B64": base64.b64encode(inner).decode()}
    if kind == "BS":
        return {"BS64": [base64.b64encode(b).decode() for b in inner]}
    if kind == "M":
        return {"M": {k: encode_value(v) for k, v in inner.items()}}
    if kind == "L":
        return {"L": [encode_value(v) for v in inner]}
    return {kind: inner}


def decode_value(value: dict[str, Any]) -> dict[str, Any]:
    (kind, inner), = value.items()
    if kind == "B64":
        return {"B": base64.b64decode(inner)}
    if kind == "BS64":
        return {"BS": [base64.b64decode(b) for b in inner]}
    if kind == "M":
        return {"M": {k: decode_value(v) for k, v in inner.items()}}
    if kind == "L":
        return {"L": [decode_value(v) for v in inner]}
    return {kind: inner}


def _object_file(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


TableReader = Callable[[str, Callable[[Iterable[dict[str, Any]]], list[str]]], list[str]]
"""How a copy reads the table in this process (``MotoServer.read_table``), where a Scan over HTTP would do."""


def item_lines(items: Iterable[dict[str, Any]]) -> list[str]:
    """Items in DynamoDB's JSON as the lines of ``TABLE_FILE``."""
    return [json.dumps({k: encode_value(v) for k, v in item.items()}) for item in items]


async def snapshot(world: AWSWorld, directory: Path, read_table: TableReader | None = None) -> int:
    """Save the table and the bucket into ``directory``; return the number of items saved (``copy_state``, on a
    thread: the clients are opened on the loop, the copy needs no loop)."""
    dynamodb, s3 = await world.clients.dynamodb(), await world.clients.s3()
    return await asyncio.to_thread(copy_state, world.config, dynamodb.client, s3.client, directory, read_table)


def copy_state(config: AWSConfig, dynamodb: Any, s3: Any, directory: Path,
               read_table: TableReader | None = None) -> int:
    """Save the table and the bucket into ``directory`` with botocore's own (synchronous, thread-safe) clients;
    return the number of items saved. Objects are copied once (awsworld never rewrites an object under the same key
    with other bytes unless its ETag changes, which the manifest compares). With ``read_table`` (``dev``'s embedded
    moto), the table is read in this process instead of by a Scan.

    Synchronous, so a copy needs nothing of ``dev``'s event loop: ``Snapshots`` copies on a thread of its own, and a
    step that blocks the loop (``time.sleep`` in an ``async def``) does not hold the copies back.

    The files are replaced in an order that leaves a loadable pair at every moment, so a crash or a kill mid-copy
    loses no object the saved table needs: the objects are listed after the Scan (awsworld writes an object before
    the item that refers to it) and copied first, the manifest then names the old objects and the new, then the
    table is replaced, and only then are the objects no longer in the bucket forgotten."""
    lines: list[str] = []
    request: dict[str, Any] = {"TableName": config.table_name, "ConsistentRead": True}
    while read_table is None:
        page = dynamodb.scan(**request)
        lines += item_lines(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            break
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    if read_table is not None:
        lines = read_table(config.table_name, item_lines)

    objects = directory / OBJECTS_DIR
    _private_directory(objects)
    manifest_path = directory / MANIFEST_FILE
    old: dict[str, str] = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    new: dict[str, str] = {}
    listing: dict[str, Any] = {"Bucket": config.bucket_name}
    while True:
        page = s3.list_objects_v2(**listing)
        for entry in page.get("Contents", []):
            key, etag = entry["Key"], entry.get("ETag", "")
            new[key] = etag
            if old.get(key) != etag or not (objects / _object_file(key)).exists():
                body = s3.get_object(Bucket=config.bucket_name, Key=key)["Body"]
                try:
                    _write_atomic(objects / _object_file(key), body.read())
                finally:
                    body.close()
        if not page.get("IsTruncated"):
            break
        listing["ContinuationToken"] = page["NextContinuationToken"]
    if set(new) - set(old):
        _write_atomic(manifest_path, json.dumps({**old, **new}).encode())
    _write_atomic(directory / TABLE_FILE, "".join(line + "\n" for line in lines).encode())
    _write_atomic(manifest_path, json.dumps(new).encode())
    for key in set(old) - set(new):
        (objects / _object_file(key)).unlink(missing_ok=True)
    return len(lines)


class Snapshots:
    """When ``dev`` copies the emulator into DIR: only when ``changes`` (the emulator's count of requests that may
    have changed its table or bucket: ``local/moto_server.py``) moved since the last copy, and, while serving, no
    sooner than ``interval`` after it; on a thread of its own (``start``), not on ``dev``'s event loop.

    Copying every 5 s whatever happened, by a whole-table Scan every DynamoDB request waited on (moto's server takes
    one at a time), made an idle ``dev`` with 10,000 items spend most of its time copying (a copy of 15 MB took
    6.7 s here), slowed the runs it served, and made Ctrl-C wait for one more copy of a table nothing had touched.
    ``dev`` now reads the table in its own process (``read_table``: ``MotoServer.read_table``, 0.16 s for 10,000
    items) and copies only after a change. Every object awsworld writes comes with a write to the table, so a count
    of moto's requests sees every change even when S3 is LocalStack's.

    The copies were made on the event loop, which every delivery shares: a step that blocks it (``time.sleep`` in an
    ``async def`` step, a blocking HTTP call) held each copy back by the blocking of every delivery ahead of it, so
    while such steps ran no copy was made, and ``kill -9`` lost every run started meanwhile (the docs promise at most
    the last 5 s). The thread copies on time however busy the loop is: the moto server answers on threads of its
    own, and ``copy_state`` uses botocore's clients directly."""

    def __init__(self, world: AWSWorld, directory: Path, changes: Callable[[], int], *,
                 read_table: TableReader | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.world = world
        self.directory = directory
        self.changes = changes
        self.read_table = read_table
        self.clock = clock
        self.items = 0
        """How many items the last copy saved."""
        self.copies = 0
        """How many copies it made (the periodic ones, ``keep``'s, a stop's)."""
        self._copied: int | None = None  # ``changes`` when the last copy started
        self._seconds: collections.deque[float] = collections.deque(maxlen=COPY_TIMES_KEPT)  # the last copies' times
        self._copying = threading.RLock()  # one copy at a time: the thread's, a resume's (``keep``), the last at a stop
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._clients: tuple[Any, Any] | None = None  # botocore's DynamoDB and S3 clients (opened on the loop)
        self._kept_late_said = False  # ``keep`` said that copies are too slow to wait for

    def restored(self, items: int) -> None:
        """The table and bucket were just loaded from DIR: what DIR holds stands for them (a restore's changes to
        what it loads, ``_restored``, are made again by the next restore), so they are not copied back at once."""
        self._copied, self.items = self.changes(), items

    def interval(self) -> float:
        """Seconds from one copy to the next: ``SNAPSHOT_SECONDS``, longer when copying takes more than
        ``SNAPSHOT_SHARE`` of that. What copying takes is the quickest of the last ``COPY_TIMES_KEPT`` copies: a
        copy's time is mostly waiting when ``dev`` is busy (for moto's lock, which every request holds, and for the
        interpreter), and the last copy alone let one such wait widen the window a crash loses: during a 1,000-step
        fan-out, a copy of 2,000 items that waited 1.8 s for the lock took 3.9 s and put the next one 19.6 s later,
        so ``kill -9`` lost 16 s of step results where the docs say 5 s. A table slow to copy every time still
        spaces the copies out."""
        return max(SNAPSHOT_SECONDS, min(self._seconds, default=0.0) / SNAPSHOT_SHARE)

    async def save(self) -> bool:
        """Copy the table and bucket into DIR if anything may have changed since the last copy; True if it did."""
        await self._open()
        return await asyncio.to_thread(self._save)

    async def start(self) -> None:
        """Copy every ``interval`` on a thread of its own, until ``stop``."""
        await self._open()
        self._stop.clear()
        self._thread = threading.Thread(target=self._every_interval, name="awsworld-dev-snapshots", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        """Stop copying on the thread (a copy under way ends first)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.to_thread(thread.join)

    async def _open(self) -> None:
        if self._clients is None:
            self._clients = (await self.world.clients.dynamodb()).client, (await self.world.clients.s3()).client

    def keep(self) -> None:
        """Copy now, on the caller's thread (one of the emulator's, answering a write that recorded a hook's payload:
        ``local/moto_server.py``'s ``kept_first``), so the answer ``delivered`` is given only once DIR holds the
        payload. A copy that began after this write holds it already: resumes that come together wait for one copy
        (the one under way, or the next), not one each. A failed copy is said, as the periodic one's is, and the
        answer goes out all the same.

        Not when copying takes longer than ``KEEP_SECONDS`` (``bench/dev_resume_keep.py``: 0.04 s for 100 runs
        waiting on a hook, 4 s for 10,000, 70,000 items): every resume would wait that long, and every DynamoDB
        request while the table is read. Then the answer goes out at once, as before, and ``dev`` says once that a
        crash may lose it (docs/how-to/hooks.md: run the resume again with its key)."""
        if min(self._seconds, default=0.0) > KEEP_SECONDS:
            if not self._kept_late_said:
                self._kept_late_said = True
                log.warning("dev: copying the state to %s takes %.1f s, so resumes are answered before a copy holds "
                            "them: a crash (kill -9) loses one answered in the %.0f s before it (run it again with "
                            "its --idempotency-key)", self.directory, min(self._seconds), self.interval())
            return
        written = self.changes()  # this write is counted (``SerializedDynamoDB``): a copy from this mark on holds it
        try:
            with self._copying:
                if self._copied is not None and self._copied >= written:
                    return
                self._save()
        except Exception as error:  # the emulator going away, a full disk
            log.warning("dev: copying the state to %s before answering a resume failed: %s: %s", self.directory,
                        type(error).__name__, error)

    def _every_interval(self) -> None:
        while not self._stop.wait(self.interval()):
            try:
                self._save()
            except Exception as error:  # the emulator going away, a full disk: said, and tried again next time
                log.warning("dev: copying the state to %s failed: %s: %s", self.directory, type(error).__name__,
                            error)

    def _save(self) -> bool:
        assert self._clients is not None
        with self._copying:
            mark = self.changes()  # read before the copy: a write after this is seen by the next look
            if mark == self._copied:
                return False
            started = self.clock()
            self.items = copy_state(self.world.config, *self._clients, self.directory, self.read_table)
            self._seconds.append(self.clock() - started)
            self._copied = mark
            self.copies += 1
            return True


TableWriter = Callable[[str, list[dict[str, Any]]], None]
"""How a restore puts items into the table in this process (``MotoServer.put_items``), where BatchWriteItem would."""


async def restore(world: AWSWorld, directory: Path, put_items: TableWriter | None = None) -> int:
    """Load a snapshot into freshly provisioned (empty) resources; return the number of items loaded. With
    ``put_items`` (``dev``'s embedded moto), the items are put in this process."""
    config = world.config
    table = directory / TABLE_FILE
    if not table.exists():
        return 0
    dynamodb, s3 = await world.clients.dynamodb(), await world.clients.s3()
    ended = datetime.now(UTC).isoformat(timespec="microseconds")
    items = [restored for line in table.read_text(encoding="utf-8").splitlines() if line
             if (restored := _restored(json.loads(line), ended)) is not None]
    decoded = [{k: decode_value(v) for k, v in item.items()} for item in items]
    if put_items is not None:
        await asyncio.to_thread(put_items, config.table_name, decoded)
    else:
        for start in range(0, len(decoded), 25):
            pending: dict[str, Any] = {config.table_name: [{"PutRequest": {"Item": item}}
                                                           for item in decoded[start:start + 25]]}
            while pending:
                answer = await dynamodb.batch_write_item(RequestItems=pending)
                pending = answer.get("UnprocessedItems") or {}
    manifest_path = directory / MANIFEST_FILE
    manifest: dict[str, str] = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for key in manifest:
        path = directory / OBJECTS_DIR / _object_file(key)
        if path.exists():
            await s3.put_object(Bucket=config.bucket_name, Key=key, Body=path.read_bytes())
    return len(items)


def _restored(item: dict[str, Any], now: str) -> dict[str, Any] | None:
    """A saved item as a restore loads it: dedup markers dropped, running steps' leases ended, rate buckets and the
    reservations kept for steps without the starts reserved ahead (see above)."""
    pk, sk = item.get("pk", {}).get("S", ""), item.get("sk", {}).get("S", "")
    if pk.startswith(DEDUP_PREFIX):
        return None
    if pk.startswith(PARTITION_PREFIX) and sk.startswith(RESERVED_PREFIX):
        return None  # a start reserved far ahead: its message was in the queue, and its bucket forgets it (below)
    if pk.startswith(PARTITION_PREFIX) and sk.startswith(POOL_PREFIX):
        pool = decode_pool(item["s"]["S"], int(item["v"]["N"]), pk.removeprefix(PARTITION_PREFIX),
                           sk.removeprefix(POOL_PREFIX))
        item["s"] = {"S": encode_pool(reservations_lost(pool, datetime.fromisoformat(now)))}
    if sk.startswith(STEP_PREFIX) and item.get("status", {}).get("S") == "running":
        item[LEASE_UNTIL_FIELD] = {"S": now}
    if sk == RUN_SK and "M" in item.get(INLINE_STEP, {}):
        item[INLINE_STEP]["M"]["l"] = {"S": now}
    return item
