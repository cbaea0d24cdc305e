"""A bill in the project: what a workflow run costs on AWS, per step, at us-east-1 on-demand list prices.

Every workload runs end to end on the embedded emulator through the real delivery path (``LocalAWS``: its
poller hands SQS messages to the delivery code the Lambda flow handler runs). A ``Meter`` puts botocore
handlers on every client of the World (``AWSClients.register_handler``) and bills each request as AWS would:

* DynamoDB writes: 1 WRU per started KB of the item (2 in ``TransactWriteItems``, for every Put, Update, Delete
  and ConditionCheck in it), sized at the larger of the item before and after the write. The after size is
  read back with a separate, uncounted client; the before size comes from a shadow of every item the World
  wrote (so the meter goes on a fresh World). A write refused by its condition, and a cancelled transaction,
  bill too. A write that changes what a GSI holds adds 1 WRU per started KB of the index entry (2 when the
  index key changed: delete + put).
* DynamoDB reads: 1 RRU per started 4 KB (0.5 eventually consistent, 2 in ``TransactGetItems``), per item for
  GetItem/BatchGetItem (a projection does not make the item smaller), per request over all items evaluated
  for Query (a filtered or projected Query is re-run uncounted to see them).
* SQS: 1 request per call, plus 1 per extra 64 KB of payload. ReceiveMessage calls that return nothing are
  the poller idling (on Lambda: the event source mapping's long polls, a fixed cost per queue, not per step):
  they are counted but not priced per step.
* S3: PUT/COPY/POST/LIST $0.005 per 1,000, GET/HEAD and others $0.0004 per 1,000, DELETE free.

The harness checks, per workload, that the requests it metered are exactly the World's own counters
(``RequestStats``), and fails loudly when not. Lambda compute, CloudWatch, storage and transfer are not billed.

The watchdog (issue 21) is priced twice: per run, what each workload's run paid for its due (the ``byDue``
index's writes and the plain run-head writes that correct a resting run's due), and per tick, what the schedule's
minute costs whatever runs exist (a tick with nothing due), and what waking one run costs (a false wake: the
run was fine; a lost message's recovery costs that plus the work the lost message stood for).

A workflow resuming another run's hook (``--only resumehook``) is priced per send: the built-in step, the target's
``hook_received`` and wake, both runs' ends; once with the hook there, once with ``wait=`` started before it (a
look that finds none, then the send). Every send's ``hook_received`` puts the call's ``RESUMEONCE`` marker in its
transaction (2 WRU: what keeps a retry from resuming another hook, ``_worker/resume_calls.py``); a retry reads
nothing more.

Schedules (issue 25) are priced per scheduled run: one-step runs fired by a tick from schedules whose last run
has ended, against the same runs started by ``Client.start``; the difference is what a schedule adds to a run.

Limits across runs (issue 35) are priced per run and per step attempt: one-step runs whose workflow has a keyed
concurrency limit (each run its own key: uncontended), whose step has a concurrency limit, and whose step has a
rate limit, against the same runs without a limit; then runs of one key that all wait (contended: each registers
as a waiter and is handed its slot by the run before it), runs started together whose step waits for a rate's
token (each reserves one start and sends its message again, delayed to it), and a minute of one run waiting (what a
wait costs while nothing moves: no polling).

Long waits (``--only longwait``) are priced per run: a run waiting 7 days on a hook (resumed then; without a
timeout, and with one of 8 days), and one sleeping 30 days. A wait that long cannot run in real time, so time is made
small: one SQS message reaches ``LONG_REACH`` s (SQS's 900 s), the watch horizon and bucket shrink with it, and the
watchdog's tick runs every ``LONG_TICK`` s. Each shape runs at two lengths (in reaches); the bill is linear in the
length (a constant and a cost per reach), and is printed extrapolated to the real lengths (672 reaches for 7 days,
2,880 for 30). Before the fix a wait longer than one message reached hopped: a delivery every 15 minutes re-sent
its message (Lambda invocations not billed here; the deliveries column counts them).

A parked run (``--only parked``: its hook resumed under a bad deploy, so it diverges, is parked and comes back every
``AWSWORLD_PARK_SECONDS``, an hour, until the deploy is rolled back) is priced per run on the same small time: an
hour is ``PARK_REACHES`` reaches, the run is measured parked for 1 and 3 redeliveries, and the row extrapolates to a
day (24). Before the fix its hourly message hopped (3 deliveries a redelivery on this small time, 4 on SQS's:
80 deliveries, $282.87 per million runs for a day); now the watchdog's wake is the redelivery (30 deliveries,
$216.63; each wake is billed the tick's eight index Queries, which a minute's due runs share in the stack).

Run: ``python bench/bill.py`` (about a minute of CPU on two cores), ``--quick`` for smaller N (per-step figures
then carry more of each run's fixed cost), ``--dynamodb dynamodb-local``, ``--only fanout,stream``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import math
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3

from awsworld import (
    Client,
    Concurrency,
    RateLimit,
    Run,
    Schedule,
    batch_map,
    create_hook,
    get_writable,
    resume_hook,
    sleep,
    step,
    workflow,
)
from awsworld._worker.tick import TICK_BODY
from awsworld._worker.watchdog import sweep
from awsworld.authoring.definitions import REGISTRY, WorkflowDef, workflow_name
from awsworld.aws import AWSWorld, RequestStats
from awsworld.local import LocalAWS
from awsworld.world.errors import HookNotFoundError

# -- prices (us-east-1, on-demand, list) ---------------------------------------------------------------------

WRU_PRICE = 0.625 / 1e6
RRU_PRICE = 0.125 / 1e6
SQS_PRICE = 0.40 / 1e6
S3_TIER1_PRICE = 0.005 / 1e3  # PUT, COPY, POST, LIST
S3_TIER2_PRICE = 0.0004 / 1e3  # GET, HEAD and all other requests
KMS_PRICE = 0.03 / 1e4  # GenerateDataKey, Decrypt (per-run payload encryption, --encrypt)
SQS_CHUNK = 64 * 1024
WRITE_BLOCK = 1024
READ_BLOCK = 4096

TARGETS = {"serial tiny": 4.5, "serial realistic": 7.0, "fan-out": 8.0, "stream": 1.0}
ISSUE_MEASURED = {"serial tiny": 9.16, "serial realistic": 28.24, "fan-out": 15.83}  # issue 10, before the work
LAMBDA_DURABLE = "AWS Lambda durable functions: about $8 per million operations"


# -- DynamoDB item size ------------------------------------------------------------------------------------


def number_size(text: str) -> int:
    """A DynamoDB number's size: about 1 byte per two significant digits, plus 1 (leading and trailing zeros
    are trimmed; sign, point and exponent are not digits)."""
    mantissa = re.split("[eE]", text.strip().lstrip("+-"), maxsplit=1)[0].replace(".", "")
    digits = len(mantissa.strip("0"))
    return (digits + 1) // 2 + 1


def value_size(value: Mapping[str, Any]) -> int:
    """The size of one AttributeValue (``{"S": ...}``, ``{"N": ...}``, ...), without its attribute name."""
    (kind, inner), = value.items()
    if kind == "S":
        return len(inner.encode("utf-8", "surrogatepass"))
    if kind == "N":
        return number_size(inner)
    if kind == "B":
        return len(inner) if isinstance(inner, bytes | bytearray) else len(base64.b64decode(inner))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in inner)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + value_size(v) + 1 for k, v in inner.items())
    if kind == "SS":
        return sum(len(s.encode("utf-8")) for s in inner)
    if kind == "NS":
        return sum(number_size(n) for n in inner)
    if kind == "BS":
        return sum(value_size({"B": b}) for b in inner)
    raise ValueError(f"not a DynamoDB AttributeValue type: {kind}")


def item_size(item: Mapping[str, Mapping[str, Any]] | None) -> int:
    """The size of a DynamoDB item in low-level form, as DynamoDB bills it: the sum over its attributes of the
    UTF-8 bytes of the attribute name plus the size of the value.

    The rules, from "Item sizes and formats" / "Capacity unit consumption" in the DynamoDB Developer Guide
    (docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
    strings are their UTF-8 bytes; numbers are variable length, up to 38 significant digits, leading and
    trailing zeros trimmed, about 1 byte per two significant digits plus 1 byte; binary is its raw length (not
    the base64 text); null and Boolean are 1 byte; a List or Map is 3 bytes of overhead plus its elements plus 1
    byte per element (a Map element includes its key name); a set is the sum of its elements."""
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def write_units(size: int, transactional: bool) -> int:
    return (2 if transactional else 1) * max(1, math.ceil(size / WRITE_BLOCK))


def read_units(size: int, consistent: bool, transactional: bool = False) -> float:
    units = max(1, math.ceil(size / READ_BLOCK))
    return units * 2 if transactional else units if consistent else units / 2


def kind_of(sort_key: str) -> str:
    """The item kind a sort key names: ``EVT#...`` -> ``EVT#``, ``RUN`` -> ``RUN``."""
    return sort_key.split("#", 1)[0] + "#" if "#" in sort_key else sort_key


def s3_tier(operation: str) -> int:
    """1: PUT/COPY/POST/LIST ($0.005 per 1,000); 2: GET/HEAD/other ($0.0004 per 1,000); 0: DELETE (free)."""
    if operation.startswith(("Delete", "Abort")):
        return 0
    if operation.startswith(("Put", "Copy", "List", "Create", "Complete", "Upload", "Restore")):
        return 1
    return 2


def _diff(a: Mapping[Any, float], b: Mapping[Any, float]) -> Counter[Any]:
    return Counter({k: a.get(k, 0) - b.get(k, 0) for k in set(a) | set(b)})


# -- one workload's bill -----------------------------------------------------------------------------------


@dataclass
class Bill:
    """What the requests of one window cost. ``wru``/``rru`` are keyed by (item kind, how)."""

    requests: Counter[str] = field(default_factory=Counter)  # service.Operation, as RequestStats counts them
    errors: Counter[str] = field(default_factory=Counter)  # requests answered with an error (still counted)
    transaction_items: int = 0
    wru: Counter[tuple[str, str]] = field(default_factory=Counter)
    rru: Counter[tuple[str, str]] = field(default_factory=Counter)
    sqs: Counter[str] = field(default_factory=Counter)  # billable SQS requests (64 KB chunks) by operation
    idle_receives: int = 0
    s3: Counter[str] = field(default_factory=Counter)
    kms: Counter[str] = field(default_factory=Counter)
    head_writes: int = 0  # plain (not transactional) writes of a run head: the watchdog's snoozes, due corrections

    def __sub__(self, other: Bill) -> Bill:
        return Bill(_diff(self.requests, other.requests), _diff(self.errors, other.errors),
                    self.transaction_items - other.transaction_items, _diff(self.wru, other.wru),
                    _diff(self.rru, other.rru), _diff(self.sqs, other.sqs), self.idle_receives - other.idle_receives,
                    _diff(self.s3, other.s3), _diff(self.kms, other.kms), self.head_writes - other.head_writes)

    def watch_wru(self) -> tuple[float, float]:
        """(the byDue index's WRU, the WRU of plain run-head writes): what the watchdog's due costs."""
        return self.wru[("GSI byDue", "index")], self.wru[("RUN", "write")]

    def due_moves(self, runs: int) -> int:
        """How often ``runs`` runs' ``byDue`` index keys moved beyond entering the index once and leaving it once
        (1 WRU each). The key is the due rounded to a minute (``aws/resources.py``), so a run whose commits straddle
        a minute's turn moves it once more: a delete and a put, 2 WRU. Which runs straddle one is the wall clock's
        luck, not the workload's (CI saw one of 8 one-step runs do it under load), so a comparison of two workloads
        leaves the moves out (``wru_apart_from_due_moves``) and bounds them apart."""
        return max(0, round((self.wru[("GSI byDue", "index")] - 2 * runs) / 2))

    def wru_apart_from_due_moves(self, runs: int) -> float:
        """All WRU but the 2 of each ``due_moves``: what two workloads' runs write, comparable whenever they ran."""
        return sum(self.wru.values()) - 2 * self.due_moves(runs)

    def dynamodb_requests(self) -> Counter[str]:
        return Counter({k.split(".", 1)[1]: n for k, n in self.requests.items() if k.startswith("dynamodb.")})

    def service_requests(self, service: str) -> int:
        return sum(n for k, n in self.requests.items() if k.startswith(service + "."))

    def dollars(self) -> dict[str, float]:
        s3 = sum(n * (0, S3_TIER1_PRICE, S3_TIER2_PRICE)[s3_tier(op)] for op, n in self.s3.items())
        return {"dynamodb": sum(self.wru.values()) * WRU_PRICE + sum(self.rru.values()) * RRU_PRICE,
                "sqs": sum(self.sqs.values()) * SQS_PRICE, "s3": s3, "kms": sum(self.kms.values()) * KMS_PRICE}

    def cost_lines(self) -> list[tuple[str, float, str, float]]:
        """(what, units, unit, dollars) for every line of the bill, largest first."""
        lines = [(f"DynamoDB {kind} {how}", u, "WRU", u * WRU_PRICE) for (kind, how), u in self.wru.items()]
        lines += [(f"DynamoDB {kind} {how}", u, "RRU", u * RRU_PRICE) for (kind, how), u in self.rru.items()]
        lines += [(f"SQS {op}", n, "req", n * SQS_PRICE) for op, n in self.sqs.items()]
        lines += [(f"S3 {op}", n, "req", n * (0, S3_TIER1_PRICE, S3_TIER2_PRICE)[s3_tier(op)])
                  for op, n in self.s3.items()]
        lines += [(f"KMS {op}", n, "req", n * KMS_PRICE) for op, n in self.kms.items()]
        return sorted(lines, key=lambda line: -line[3])

    def check(self, stats: RequestStats, name: str) -> None:
        """Fail loudly unless the metered requests are exactly what the World counted in the same window."""
        metered, counted = +self.requests, +stats.requests
        if metered != counted or self.transaction_items != stats.transaction_items:
            diff = {k: (metered.get(k, 0), counted.get(k, 0)) for k in set(metered) | set(counted)
                    if metered.get(k, 0) != counted.get(k, 0)}
            raise AssertionError(f"{name}: metered requests differ from the World's counters (metered, counted): "
                                 f"{diff}; transaction items {self.transaction_items} vs {stats.transaction_items}")


# -- the meter ---------------------------------------------------------------------------------------------

_PARAMS = "awsworld.bill.params"
_METERED = "awsworld.bill.metered"
_TOKEN = re.compile(r"[#:][A-Za-z0-9_]+")
_QUERY_KEEP = ("TableName", "IndexName", "KeyConditionExpression", "KeyConditions", "ExclusiveStartKey", "Limit",
               "ScanIndexForward", "ConsistentRead", "Segment", "TotalSegments")

Key = tuple[tuple[str, Any], ...]  # ((type, value), ...) of the table's key attributes, in schema order
Shadowed = tuple[int, dict[str, Any] | None]  # (size, item) as last written; (0, None) when absent


@dataclass
class _Index:
    name: str
    keys: tuple[str, ...]
    projection: str
    attributes: tuple[str, ...]


class Meter:
    """Bills every request of one World's clients into the current ``Bill`` (``begin()`` / ``end()``)."""

    def __init__(self, world: AWSWorld) -> None:
        config = world.config
        self.table = config.table_name
        # Uncounted: its reads (after sizes, re-run queries) are not the World's and touch no counter.
        self._ddb = boto3.client("dynamodb", region_name=config.region_name or "us-east-1",
                                 endpoint_url=config.dynamodb_endpoint_url or config.endpoint_url,
                                 **config.client_options)  # type: ignore[arg-type]
        table = self._ddb.describe_table(TableName=self.table)["Table"]
        self.key_names = tuple(k["AttributeName"] for k in table["KeySchema"])
        self.indexes = [_Index(g["IndexName"], tuple(k["AttributeName"] for k in g["KeySchema"]),
                               g["Projection"]["ProjectionType"], tuple(g["Projection"].get("NonKeyAttributes", ())))
                        for g in table.get("GlobalSecondaryIndexes", [])]
        self.shadow: dict[Key, Shadowed] = {}
        self.bill = Bill()
        self.largest_head = 0  # bytes: the largest run head any write left
        for event, handler in (("before-parameter-build", self._on_params), ("before-call", self._on_call),
                               ("after-call", self._on_answer)):
            world.clients.register_handler(event, handler)

    def begin(self) -> None:
        self.bill = Bill()

    def end(self) -> Bill:
        bill, self.bill = self.bill, Bill()
        return bill

    # -- botocore handlers (synchronous: nothing else runs between a write's answer and its read-back) -----

    def _on_params(self, params: Any = None, context: Any = None, **_: Any) -> None:
        if isinstance(context, dict):
            context[_PARAMS] = params if isinstance(params, dict) else {}

    def _on_call(self, model: Any, context: Any = None, **_: Any) -> None:
        key = f"{model.service_model.service_name}.{model.name}"
        self.bill.requests[key] += 1
        if isinstance(context, dict):
            context[_METERED] = True
            if key == "dynamodb.TransactWriteItems":
                self.bill.transaction_items += len(context.get(_PARAMS, {}).get("TransactItems") or ())

    def _on_answer(self, http_response: Any, parsed: Any, model: Any, context: Any = None, **_: Any) -> None:
        if not isinstance(context, dict) or _METERED not in context:  # begun before the meter was installed
            return
        # Billed in the window it is answered in: a long poll begun while idle brings the next run's message.
        bill = self.bill
        params = context.get(_PARAMS, {})
        service, operation = model.service_model.service_name, model.name
        error = (parsed.get("Error") or {}).get("Code") if http_response.status_code >= 300 else None
        if error:
            bill.errors[f"{service}.{operation}"] += 1
        if service == "dynamodb":
            self._dynamodb(bill, operation, params, parsed, error)
        elif service == "sqs":
            self._sqs(bill, operation, params, parsed, error)
        elif service == "s3":
            bill.s3[operation] += 1
        elif service == "kms":
            bill.kms[operation] += 1

    # -- SQS, S3 -----------------------------------------------------------------------------------------

    @staticmethod
    def _sqs(bill: Bill, operation: str, params: dict[str, Any], parsed: dict[str, Any], error: str | None) -> None:
        def size(message: Mapping[str, Any]) -> int:
            body = len(str(message.get("MessageBody", message.get("Body", ""))).encode("utf-8"))
            attributes = sum(len(name) + len(a.get("DataType", "")) + len(a.get("StringValue", "") or "")
                             + len(a.get("BinaryValue", b"") or b"")
                             for name, a in (message.get("MessageAttributes") or {}).items())
            return body + attributes

        if operation == "ReceiveMessage" and not error and not parsed.get("Messages"):
            bill.idle_receives += 1
            return
        payload = 0
        if operation == "SendMessage":
            payload = size(params)
        elif operation == "SendMessageBatch":
            payload = sum(size(entry) for entry in params.get("Entries", ()))
        elif operation == "ReceiveMessage":
            payload = sum(size(message) for message in parsed.get("Messages", ()))
        bill.sqs[operation] += max(1, math.ceil(payload / SQS_CHUNK))

    # -- DynamoDB ----------------------------------------------------------------------------------------

    def _key(self, item: Mapping[str, Any]) -> Key:
        return tuple(next(iter(item[name].items())) for name in self.key_names)

    @staticmethod
    def _kind(key: Key) -> str:
        return kind_of(str(key[-1][1]))

    def _current(self, keys: Iterable[Key]) -> dict[Key, Shadowed]:
        """The items at ``keys`` now, read consistently with the uncounted client."""
        found: dict[Key, Shadowed] = {}
        wanted = list(dict.fromkeys(keys))
        pending = wanted
        while pending:
            batch, pending = pending[:100], pending[100:]
            request = [{n: {t: v} for n, (t, v) in zip(self.key_names, key, strict=True)} for key in batch]
            while request:
                answer = self._ddb.batch_get_item(RequestItems={self.table: {"Keys": request, "ConsistentRead": True}})
                for item in answer["Responses"].get(self.table, []):
                    found[self._key(item)] = (item_size(item), item)
                request = answer.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
        return {key: found.get(key, (0, None)) for key in wanted}

    def _full_size(self, key: Key) -> int:
        if key in self.shadow:
            return self.shadow[key][0]
        return self._current([key])[key][0]

    def _dynamodb(self, bill: Bill, operation: str, params: dict[str, Any], parsed: dict[str, Any],
                  error: str | None) -> None:
        if operation in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"):
            self._write(bill, operation, params, parsed, error)
        elif error:
            return  # a read refused (validation, throttling) consumes nothing
        elif operation == "GetItem":
            self._get(bill, operation, [(params["Key"], parsed.get("Item"))], params, False)
        elif operation == "BatchGetItem":
            for table, request in params.get("RequestItems", {}).items():
                unprocessed = {self._key(k) for k in parsed.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])}
                answered = {self._key(i): i for i in parsed.get("Responses", {}).get(table, [])}
                pairs = [(k, answered.get(self._key(k))) for k in request["Keys"] if self._key(k) not in unprocessed]
                self._get(bill, operation, pairs, request, False)
        elif operation == "TransactGetItems":
            for entry, answer in zip(params.get("TransactItems", ()), parsed.get("Responses", ()), strict=False):
                self._get(bill, operation, [(entry["Get"]["Key"], answer.get("Item"))], entry["Get"], True)
        elif operation in ("Query", "Scan"):
            self._query(bill, operation, params, parsed)

    def _get(self, bill: Bill, operation: str, pairs: list[tuple[dict[str, Any], Any]], request: dict[str, Any],
             transactional: bool) -> None:
        projected = "ProjectionExpression" in request or "AttributesToGet" in request
        for key_item, item in pairs:
            key = self._key(key_item)
            size = self._full_size(key) if projected and item else item_size(item)
            bill.rru[(self._kind(key), operation)] += read_units(size, bool(request.get("ConsistentRead")),
                                                                transactional)

    def _query(self, bill: Bill, operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> None:
        items = parsed.get("Items", [])
        if any(p in params for p in ("FilterExpression", "ProjectionExpression", "Select", "QueryFilter",
                                     "ScanFilter", "AttributesToGet")):
            # What DynamoDB read (and bills) is every item the key condition and Limit evaluated, whole.
            rerun = {k: params[k] for k in _QUERY_KEEP if k in params}
            used = set(_TOKEN.findall(params.get("KeyConditionExpression", "")))
            for name in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
                kept = {k: v for k, v in params.get(name, {}).items() if k in used}
                if kept:
                    rerun[name] = kept
            items = getattr(self._ddb, "query" if operation == "Query" else "scan")(**rerun).get("Items", [])
        sizes = Counter[str]()
        for item in items:
            sizes[self._kind(self._key(item))] += item_size(item)
        total = sum(sizes.values())
        units = read_units(total, bool(params.get("ConsistentRead")))
        how = operation + (f" {params['IndexName']}" if "IndexName" in params else "")
        if not total:
            bill.rru[("(nothing)", how)] += units
        for kind, size in sizes.items():
            bill.rru[(kind, how)] += units * size / total

    def _write(self, bill: Bill, operation: str, params: dict[str, Any], parsed: dict[str, Any],
               error: str | None) -> None:
        transactional = operation == "TransactWriteItems"
        # (key, action, the item a Put writes)
        writes: list[tuple[Key, str, dict[str, Any] | None]] = []
        if operation == "PutItem":
            writes.append((self._key(params["Item"]), "Put", params["Item"]))
        elif operation in ("UpdateItem", "DeleteItem"):
            writes.append((self._key(params["Key"]), operation[:-4], None))
        elif operation == "BatchWriteItem":
            left = {self._key(r.get("PutRequest", {}).get("Item") or r["DeleteRequest"]["Key"])
                    for reqs in parsed.get("UnprocessedItems", {}).values() for r in reqs}
            for requests in params.get("RequestItems", {}).values():
                for r in requests:
                    if "PutRequest" in r:
                        writes.append((self._key(r["PutRequest"]["Item"]), "Put", r["PutRequest"]["Item"]))
                    else:
                        writes.append((self._key(r["DeleteRequest"]["Key"]), "Delete", None))
            writes = [w for w in writes if w[0] not in left]
        else:
            for entry in params.get("TransactItems", ()):
                (action, body), = entry.items()
                item = body.get("Item")
                writes.append((self._key(item if item is not None else body["Key"]), action, item))
        how = "transact" if transactional else "write"
        if error:
            # A refused condition bills the item as it is (a cancelled transaction: as if written); anything
            # else (validation, throttling) consumes nothing.
            if error not in ("ConditionalCheckFailedException", "TransactionCanceledException"):
                return
            for key, _action, item in writes:
                before = self.shadow.get(key, (0, None))[0]
                bill.wru[(self._kind(key), how + " refused")] += write_units(max(before, item_size(item)),
                                                                             transactional)
            return
        updated = self._current(key for key, action, _ in writes if action == "Update")
        for key, action, item in writes:
            before = self.shadow.get(key, (0, None))
            if action == "Put":
                after: Shadowed = (item_size(item), item)
            elif action == "Delete":
                after = (0, None)
            elif action == "Update":
                after = updated[key]
            else:  # ConditionCheck
                after = before
            bill.wru[(self._kind(key), how)] += write_units(max(before[0], after[0]), transactional)
            if self._kind(key) == "RUN":
                self.largest_head = max(self.largest_head, after[0])
                if not transactional:
                    bill.head_writes += 1
            for index in self.indexes:
                units = self._index_units(index, before[1], after[1])
                if units:
                    bill.wru[(f"GSI {index.name}", "index")] += units
            if after[1] is None:
                self.shadow.pop(key, None)
            else:
                self.shadow[key] = after

    def verify(self) -> list[str]:
        """The items whose size in the shadow differs from the table's (a full uncounted Scan): none when the
        meter saw every write, so every before size it billed was the item's real size."""
        table: dict[Key, int] = {}
        for page in self._ddb.get_paginator("scan").paginate(TableName=self.table, ConsistentRead=True):
            table.update((self._key(item), item_size(item)) for item in page["Items"])
        shadow = {key: size for key, (size, _) in self.shadow.items()}
        return [f"{key}: shadow {shadow.get(key, 0)} B, table {table.get(key, 0)} B"
                for key in set(table) | set(shadow) if table.get(key, 0) != shadow.get(key, 0)]

    def _index_entry(self, index: _Index, item: dict[str, Any] | None) -> dict[str, Any] | None:
        if item is None or any(k not in item for k in index.keys):
            return None
        if index.projection == "ALL":
            return dict(item)
        names = (*self.key_names, *index.keys, *(index.attributes if index.projection == "INCLUDE" else ()))
        return {n: item[n] for n in names if n in item}

    def _index_units(self, index: _Index, before: dict[str, Any] | None, after: dict[str, Any] | None) -> int:
        """Index writes (1 WRU per started KB of the entry): a new entry, a removed one, a changed key (delete +
        put), or changed projected values (one update); nothing when the entry did not change."""
        old, new = self._index_entry(index, before), self._index_entry(index, after)
        if old == new:
            return 0
        units = 0
        key_changed = old is None or new is None or any(old[k] != new[k] for k in index.keys)
        if old is not None and key_changed:
            units += write_units(item_size(old), False)
        if new is not None:
            units += write_units(item_size(new), False)
        return units



# -- values ------------------------------------------------------------------------------------------------

_NAMES = ("Ada Lovelace", "Grace Hopper", "Alan Turing", "Edsger Dijkstra", "Barbara Liskov", "Ken Thompson",
          "Margaret Hamilton", "Donald Knuth", "Frances Allen", "John McCarthy", "Radia Perlman", "Tim Berners-Lee")
_PRODUCTS = ("kettle", "mug", "teapot", "french press", "grinder", "espresso cup", "filter papers", "tea tin",
             "milk jug", "scale", "thermos", "tray")
_CITIES = ("Lisbon", "Oslo", "Austin", "Osaka", "Nairobi", "Lyon", "Denver", "Porto", "Tallinn", "Quito")
_WORDS = ("please", "leave", "parcel", "at", "the", "side", "door", "gift", "wrap", "fragile", "call", "before",
          "delivery", "second", "floor", "ring", "twice", "no", "invoice", "in", "box")


class _Draw:
    """Deterministic draws from a seed (a workflow may compute them: no clock, no entropy)."""

    def __init__(self, seed: str) -> None:
        self.seed = seed.encode()
        self.n = 0

    def int(self, lo: int, hi: int) -> int:
        self.n += 1
        digest = hashlib.blake2b(self.seed + self.n.to_bytes(8, "big"), digest_size=8).digest()
        return lo + int.from_bytes(digest, "big") % (hi - lo + 1)

    def pick(self, options: tuple[str, ...]) -> str:
        return options[self.int(0, len(options) - 1)]

    def hex(self, n: int) -> str:
        return "".join(f"{self.int(0, 15):x}" for _ in range(n))


def _encoded(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def realistic_value(seed: str, size: int) -> dict[str, Any]:
    """An order as JSON of ``size`` bytes (compact): ids, names, amounts, timestamps and a nested list of lines."""
    draw = _Draw(seed)
    name = draw.pick(_NAMES)
    value: dict[str, Any] = {
        "id": f"ord_{draw.hex(16)}", "seed": seed, "status": draw.pick(("paid", "pending", "shipped")),
        "createdAt": f"2025-{draw.int(1, 12):02d}-{draw.int(1, 28):02d}T{draw.int(0, 23):02d}:"
                     f"{draw.int(0, 59):02d}:{draw.int(0, 59):02d}.{draw.int(0, 999):03d}Z",
        "customer": {"id": f"cus_{draw.hex(12)}", "name": name,
                     "email": name.lower().replace(" ", ".") + "@example.com",
                     "address": {"street": f"{draw.int(1, 400)} {draw.pick(_NAMES).split()[1]} Street",
                                 "city": draw.pick(_CITIES), "postcode": f"{draw.int(10000, 99999)}"}},
        "currency": "EUR", "lines": [], "total": 0.0,
    }
    while True:
        qty, cents = draw.int(1, 5), draw.int(199, 14999)
        line = {"lineId": len(value["lines"]) + 1, "sku": f"SKU-{draw.int(100000, 999999)}",
                "name": draw.pick(_PRODUCTS), "qty": qty, "unitPrice": cents / 100, "amount": qty * cents / 100,
                "tags": [draw.pick(("eco", "sale", "new", "bundle")) for _ in range(draw.int(0, 3))],
                "reservedAt": f"2025-06-{draw.int(1, 28):02d}T10:{draw.int(0, 59):02d}:00Z"}
        if _encoded(value) + _encoded(line) + 1 + len(',"note":""') > size:
            break
        value["lines"].append(line)
        value["total"] = round(value["total"] + line["amount"], 2)
    room = size - _encoded(value) - len(',"note":""')
    note = ""
    while len(note) < room:
        note += draw.pick(_WORDS) + " "
    value["note"] = note[:max(0, room)]
    return value


def incompressible_value(seed: str, size: int) -> dict[str, Any]:
    """Random base64 text (a deterministic hash stream) as JSON of ``size`` bytes: the worst case."""
    value = {"id": seed, "blob": ""}
    room = max(0, size - _encoded(value))
    value["blob"] = base64.b64encode(hashlib.shake_256(seed.encode()).digest(room))[:room].decode()
    return value


def make_value(shape: str, seed: str, size: int) -> dict[str, Any]:
    return realistic_value(seed, size) if shape == "realistic" else incompressible_value(seed, size)


WORKFLOW_INPUT, STEP_INPUT, STEP_RESULT, CHUNK = 4096, 1024, 2048, 100


# -- workloads ---------------------------------------------------------------------------------------------


@step
async def bill_add(i: int) -> int:
    return i + 1


@step
async def bill_enrich(record: dict[str, Any]) -> dict[str, Any]:
    shape = "incompressible" if "blob" in record else "realistic"
    return make_value(shape, f"{record['id']}:result", STEP_RESULT)


@step
async def bill_emit(n: int) -> int:
    out = get_writable("log")
    for i in range(n):
        line = f'{{"i":{i},"at":"2025-06-01T12:{i // 60 % 60:02d}:{i % 60:02d}Z","level":"info","msg":"record {i} ok"}}'
        await out.write(line.ljust(CHUNK - 1) + "\n")
    await out.close()
    return n


@workflow(name="bill.one_step")
async def bill_one_step(i: int) -> int:
    """A run of one step: what a scheduled run and a started run are compared on."""
    return await bill_add(i)


@step(name="bill.limited_add", concurrency=20)
async def bill_limited_add(i: int) -> int:
    return i + 1


@step(name="bill.rated_add", rate=RateLimit("1000/s", burst=1000))
async def bill_rated_add(i: int) -> int:
    return i + 1


@step(name="bill.trickled_add", rate=RateLimit("4/s", burst=1))
async def bill_trickled_add(i: int) -> int:
    return i + 1


@workflow(name="bill.trickled_step")
async def bill_trickled_step(i: int) -> int:
    """A one-step run whose step waits for its token when runs start together (``rated_runs``)."""
    return await bill_trickled_add(i)


@workflow(name="bill.keyed_run", concurrency=Concurrency(1, key=lambda key, i: key))
async def bill_keyed_run(key: str, i: int) -> int:
    """A one-step run holding its key's slot: ``bill_one_step`` with a keyed run limit."""
    return await bill_add(i)


@workflow(name="bill.limited_step")
async def bill_limited_step(i: int) -> int:
    return await bill_limited_add(i)


@workflow(name="bill.rated_step")
async def bill_rated_step(i: int) -> int:
    return await bill_rated_add(i)


@workflow(name="bill.held_run", concurrency=Concurrency(1, key=lambda key, token: key))
async def bill_held_run(key: str, token: str) -> int:
    async with create_hook(token=token) as hook:
        await hook
    return 1


@workflow(name="bill.serial")
async def bill_serial(n: int) -> int:
    total = 0
    for i in range(n):
        total += await bill_add(i)
    return total


@workflow(name="bill.values")
async def bill_values(order: dict[str, Any], n: int) -> int:
    shape = "incompressible" if "blob" in order else "realistic"
    sizes = 0
    for i in range(n):
        result = await bill_enrich(make_value(shape, f"{order['id']}:{i}", STEP_INPUT))
        sizes += len(result)
    return sizes


@workflow(name="bill.fanout")
async def bill_fanout(n: int) -> int:
    return sum(await asyncio.gather(*(bill_add(i) for i in range(n))))


@workflow(name="bill.bounded_fanout")
async def bill_bounded_fanout(n: int, limit: int) -> int:
    return sum((await batch_map(bill_add, range(n), max_concurrency=limit)).values())


@workflow(name="bill.sleep_hook")
async def bill_sleep_hook(token: str) -> int:
    a = await bill_add(0)
    await sleep(timedelta(seconds=1))
    b = await bill_add(a)
    async with create_hook(token=token) as hook:
        payload = await hook
    return await bill_add(b + int(payload["n"]))


@workflow(name="bill.resume_sender")
async def bill_resume_sender(token: str) -> int:
    """A workflow resuming another run's hook (``resume_hook``, no ``wait``): the built-in step's first attempt."""
    await resume_hook(token, "1")
    return 1


@workflow(name="bill.resume_sender_waits")
async def bill_resume_sender_waits(token: str) -> int:
    """The same with ``wait=``, started before the hook exists: a look that finds none, then the one that sends."""
    await resume_hook(token, "1", wait="1m")
    return 1


@workflow(name="bill.long_hook")
async def bill_long_hook(token: str) -> int:
    """A run waiting on an approval (``bill_long_waits``: 7 days, resumed then)."""
    async with create_hook(token=token) as hook:
        payload = await hook
    return await bill_add(int(payload))


@workflow(name="bill.long_hook_timeout")
async def bill_long_hook_timeout(token: str, timeout: float) -> int:
    """The same with a timeout (8 days, made small as the wait is): the hook is resumed before it."""
    async with create_hook(token=token, timeout=timedelta(seconds=timeout)) as hook:
        payload = await hook
    return await bill_add(int(payload))


@workflow(name="bill.long_sleep")
async def bill_long_sleep(seconds: float) -> int:
    """A 30-day sleep, made small."""
    await sleep(timedelta(seconds=seconds))
    return await bill_add(0)


@workflow(name="bill.parked")
async def bill_parked(token: str) -> int:
    """A run that waits on an approval while a bad deploy comes and goes (``Harness.parked``)."""
    async with create_hook(token=token) as hook:
        payload = await hook
    return await bill_add(int(payload))


async def bill_parked_bad_deploy(token: str) -> int:
    """The bad deploy: a step called first, so a run past its hook diverges there (and is parked)."""
    await bill_add(0)
    async with create_hook(token=token) as hook:
        payload = await hook
    return await bill_add(int(payload))


@workflow(name="bill.stream")
async def bill_stream(n: int) -> int:
    return await bill_emit(n)


# -- the harness -------------------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    unit: str
    units: int
    bill: Bill
    seconds: float
    counted: RequestStats | None = None  # the World's own counters over the same window
    note: str = ""


class Harness:
    """One LocalAWS with a metered World; an observer World (same resources, its own uncounted clients) waits
    for results and watches the queue, so waiting adds nothing to the bill."""

    def __init__(self, local: LocalAWS) -> None:
        self.local = local
        self.meter = Meter(local.world)
        self.observer = AWSWorld(local.config)
        self.watch = Client(self.observer)

    async def close(self) -> None:
        await self.observer.close()

    @property
    def client(self) -> Client:
        assert self.local.client is not None
        return self.local.client

    async def idle(self, quiet: float = 0.4, timeout: float = 120.0) -> None:
        """Until no delivery is in flight and the queue is empty (delayed messages too) for ``quiet`` seconds."""
        sqs = await self.observer.clients.sqs()
        poller = self.local.poller
        assert poller is not None
        deadline, since = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            attributes = (await sqs.get_queue_attributes(
                QueueUrl=self.local.config.queue_url,
                AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                                "ApproximateNumberOfMessagesDelayed"]))["Attributes"]
            busy = bool(poller._inflight) or any(int(v) for v in attributes.values())
            now = time.monotonic()
            if busy:
                since = None
            elif since is None:
                since = now
            elif now - since >= quiet:
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"the local poller did not go idle within {timeout} s")

    async def hook_created(self, run: Run, token: str) -> None:
        """Wait (up to a minute) until ``run`` holds the hook of ``token``: what a resume of it needs."""
        deadline = time.monotonic() + 60
        while True:
            try:
                await self.observer.hooks.get_by_token(token, resolve_data="none")
                return
            except HookNotFoundError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"run {run.run_id} never created hook {token}") from None
                await asyncio.sleep(0.05)

    async def result(self, run: Run, timeout: float = 300.0) -> Any:
        return await Run(self.watch, run.run_id).result(timeout=timeout)

    async def measure(self, name: str, unit: str, units: int, body: Callable[[], Awaitable[None]]) -> Result:
        await self.idle()
        started = time.monotonic()
        stats = self.local.world.stats
        before = stats.snapshot()
        self.meter.begin()  # no await between the snapshot and begin(), nor between end() and the snapshot
        await body()
        await self.idle()
        bill = self.meter.end()
        counted = stats.snapshot() - before
        bill.check(counted, name)
        return Result(name, unit, units, bill, time.monotonic() - started, counted)

    # -- the workloads ---------------------------------------------------------------------------------

    async def serial(self, n: int) -> Result:
        async def body() -> None:
            assert await self.result(await self.client.start(bill_serial, n)) == n * (n + 1) // 2
        return await self.measure("serial tiny", "step", n, body)

    async def values(self, n: int, shape: str) -> Result:
        order = make_value(shape, f"order-{shape}-{uuid.uuid4().hex[:8]}", WORKFLOW_INPUT)

        async def body() -> None:
            await self.result(await self.client.start(bill_values, order, n))
        name = "serial realistic" if shape == "realistic" else "serial incompressible"
        return await self.measure(name, "step", n, body)

    async def fan_out(self, n: int) -> Result:
        async def body() -> None:
            assert await self.result(await self.client.start(bill_fanout, n)) == n * (n + 1) // 2
        return await self.measure("fan-out", "step", n, body)

    async def bounded_fan_out(self, n: int, limit: int) -> Result:
        """``map`` with ``max_concurrency``: every item's end wakes the workflow (a slot opened), unlike the
        unbounded fan-out above, where only the last one does."""
        async def body() -> None:
            assert await self.result(await self.client.start(bill_bounded_fanout, n, limit)) == n * (n + 1) // 2
        return await self.measure(f"bounded fan-out ({limit} at a time)", "step", n, body)

    async def sleep_hook(self) -> Result:
        token = f"bill-{uuid.uuid4().hex}"

        async def body() -> None:
            run = await self.client.start(bill_sleep_hook, token)
            await self.hook_created(run, token)
            await self.client.resume_hook(token, {"n": 1, "approvedBy": "ops@example.com"})
            assert await self.result(run) == 4
        result = await self.measure("sleep + hook", "op", 5, body)
        result.note = "3 steps, a 1 s sleep, a hook resumed by the Client: 5 operations"
        return result

    async def workflow_resume(self) -> Result:
        """A run whose only call resumes another run's hook (``bill_long_hook``, waiting on it already): the
        sender's built-in step, the target's ``hook_received`` and wake, and both runs to their end."""
        token = f"bill-resume-{uuid.uuid4().hex}"
        target = await self.client.start(bill_long_hook, token)
        await self.hook_created(target, token)

        async def body() -> None:
            assert await self.result(await self.client.start(bill_resume_sender, token)) == 1
            assert await self.result(target) == 2  # (bill_add(1))
        result = await self.measure("workflow resume_hook", "op", 1, body)
        result.note = "a run that resumes another's hook (one built-in step), and the resumed run's end"
        return result

    async def workflow_resume_waiting(self) -> Result:
        """``workflow_resume`` with ``wait=``, the sender started first: its first look finds no hook (a rejected
        poll), the receiver is started once it has, and the next look sends."""
        token = f"bill-resume-wait-{uuid.uuid4().hex}"

        async def body() -> None:
            sender = await self.client.start(bill_resume_sender_waits, token)
            deadline = time.monotonic() + 60
            while not any(e.event_type == "step_retrying" for e in await Run(self.watch, sender.run_id).events()):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"run {sender.run_id} never looked for hook {token}")
                await asyncio.sleep(0.05)
            target = await self.client.start(bill_long_hook, token)
            assert await self.result(sender) == 1
            assert await self.result(target) == 2  # (bill_add(1))
        result = await self.measure("workflow resume_hook, wait=", "op", 1, body)
        result.note = "the same, started before the hook: one look that finds none, then the send"
        return result

    async def tick(self) -> Result:
        """The schedule's tick when nothing is due: its message (sent as the scheduler sends it), the flow
        function's one Query per index shard, the record's delete."""
        result = await self.measure("watchdog tick, nothing due", "tick", 1, await self.tick_body())
        result.note = "per minute whatever runs exist: the schedule's SendMessage, the tick's receive and delete"
        return result

    async def false_wake(self) -> Result:
        """A tick that wakes one run that was fine (waiting on a hook, its due forced into the past): the snooze,
        the wake's message, its flow's replay, and the correction that takes it out of the index again."""
        token = f"bill-wake-{uuid.uuid4().hex}"
        run = await self.client.start(bill_sleep_hook, token)
        await self.idle()
        await self.hook_created(run, token)
        await self.idle()
        seq = len(await Run(self.watch, run.run_id).events())
        assert await self.observer.watch.correct(run.run_id, datetime.now(UTC) - timedelta(minutes=2), seq=seq)
        result = await self.measure("watchdog waking one run", "wake", 1, (await self.tick_body()))
        await self.client.resume_hook(token, {"n": 1})
        await self.result(run)
        await self.idle()
        result.note = "a run at rest that was fine: what a lost message's recovery costs beyond the lost work"
        return result

    async def started_runs(self, n: int) -> Result:
        """The baseline of ``scheduled_runs``: the same one-step runs, started by ``Client.start``."""
        async def body() -> None:
            runs = [await self.client.start(bill_one_step, i) for i in range(n)]
            for i, run in enumerate(runs):
                assert await self.result(run) == i + 1
        result = await self.measure("one-step run, Client.start", "run", n, body)
        result.note = "the baseline a scheduled run is compared with"
        return result

    async def scheduled_runs(self, n: int) -> Result:
        """``n`` schedules with a tick due, each with a last run that has ended (a schedule's usual tick: its
        overlap policy reads that run's status), fired by one tick: the listing, per schedule the status read,
        the claim, the run's start and the settle, then the runs themselves."""
        last = await self.client.start(bill_one_step, 0)
        await self.result(last)
        made = datetime.now(UTC) - timedelta(seconds=90)
        for i in range(n):
            state = Schedule(every="1m", args=(i,)).state(f"bill-{i}", "bill.one_step", made, source="api")
            state = replace(state, last_run_id=last.run_id, last_tick=made)
            assert await self.local.world.schedules.write(state, expected_version=None)

        async def body() -> None:
            await (await self.tick_body())()
            await self.idle()
            for i in range(n):
                run_id = (await self.observer.schedules.get(f"bill-{i}")).last_run_id
                assert run_id is not None and run_id != last.run_id
                assert await self.result(Run(self.watch, run_id)) == i + 1
        result = await self.measure("one-step run, by a schedule", "run", n, body)
        result.note = (f"{n} schedules due in one tick (the tick's own Queries and message are shared by them); "
                       "the difference to the Client.start line is what the schedule adds per run")
        return result

    async def limited_runs(self, name: str, n: int, start: Callable[[int], Awaitable[Run]]) -> Result:
        """``n`` one-step runs started one after another, each awaited before the next (so a limit is never
        contended): what its limit adds is the difference to ``started``."""
        async def body() -> None:
            for i in range(n):
                assert await self.result(await start(i)) == i + 1
                await self.delivered()  # its slot is freed after its end is written: the next start must not meet it
        return await self.measure(name, "run", n, body)

    async def delivered(self, timeout: float = 60.0) -> None:
        """Until no delivery is in flight: what a run's delivery does after its end is written (free its slot of a
        limit) is done, so the next start cannot meet that write on the limit's pool. That overlap is the one
        contention these one-at-a-time runs had left; on a loaded machine a step limit measured 3 WRU more over 8
        runs than the bound (tests/bench/test_bill.py), which is what it costs when it happens."""
        poller = self.local.poller
        assert poller is not None
        deadline = time.monotonic() + timeout
        while poller._inflight:
            if time.monotonic() > deadline:
                raise TimeoutError(f"a delivery was still in flight after {timeout} s")
            await asyncio.sleep(0.01)

    async def contended_runs(self, n: int) -> Result:
        """``n`` one-step runs of one key, limit 1, started at once: all but the first register as waiters, and
        each is handed the slot by the run before it."""
        async def body() -> None:
            runs = [await self.client.start(bill_keyed_run, "one-key", i) for i in range(n)]
            for i, run in enumerate(runs):
                assert await self.result(run) == i + 1
        result = await self.measure("keyed run limit, contended", "run", n, body)
        result.note = f"{n} runs of one key with a limit of 1, started at once (all but one wait their turn)"
        return result

    async def rated_runs(self, n: int) -> Result:
        """``n`` one-step runs started at once, their step limited to 4 starts a second (burst 1): all but the first
        wait for a token (a reservation, and the step's message sent again, delayed to it)."""
        async def body() -> None:
            runs = [await self.client.start(bill_trickled_step, i) for i in range(n)]
            for i, run in enumerate(runs):
                assert await self.result(run) == i + 1
        result = await self.measure("step rate limit, waiting", "run", n, body)
        result.note = f"{n} runs of one step at 4/s (burst 1), started at once (all but one wait for a token)"
        return result

    async def waiting_minute(self, seconds: float) -> Result:
        """A run waiting for a slot while its key's holder runs (waits on a hook) for ``seconds``: what waiting
        costs while nothing moves (the unit is a minute)."""
        token = f"bill-held-{uuid.uuid4().hex}"
        holder = await self.client.start(bill_held_run, "held", token)
        await self.hook_created(holder, token)
        waiting = await self.client.start(bill_held_run, "held", f"{token}-2")
        await self.idle()

        async def body() -> None:
            await asyncio.sleep(seconds)
        result = await self.measure("a run waiting for a slot", "minute", 1, body)
        result.units = 1
        result.note = f"one run pending for its key's slot for {seconds:g} s, scaled to a minute; nothing polls"
        scale = 60 / seconds
        result.bill = _scaled(result.bill, scale)
        await self.client.resume_hook(token, "go")
        await self.result(holder)
        await self.client.resume_hook(f"{token}-2", "go", wait=60)
        await self.result(waiting)
        await self.idle()
        return result

    @contextlib.asynccontextmanager
    async def small_time(self, env: Mapping[str, str]) -> AsyncIterator[None]:
        """The long-wait rows' small time: one SQS message reaches ``LONG_REACH`` s, ``env`` set (``LONG_SETTINGS``
        and more), and the watchdog's tick every ``LONG_TICK`` s. A tick's index Queries are billed only when
        something is due (checked on the uncounted observer first): the empty ticks are the schedule's fixed cost,
        priced by the ``tick`` row."""
        queue = self.local.world.sqs_queue
        saved_hop, saved_env = queue.max_hop_seconds, {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        queue.max_hop_seconds = LONG_REACH

        async def ticks() -> None:
            while True:
                if await self.observer.watch.due(datetime.now(UTC), limit=1):
                    await sweep(self.local.world)
                await asyncio.sleep(LONG_TICK)

        ticker = asyncio.create_task(ticks())
        try:
            yield
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
            queue.max_hop_seconds = saved_hop
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    async def long_wait(self, shape: str, reaches: int) -> Result:
        """One run of ``shape`` (``LONG_SHAPES``) whose wait lasts ``reaches`` times one message's reach, on the
        small time of ``small_time``."""
        seconds = reaches * LONG_REACH
        assert self.local.poller is not None
        before = self.local.poller.deliveries

        async def body() -> None:
            token = f"bill-long-{uuid.uuid4().hex}"
            if shape == "sleep":
                run = await self.client.start(bill_long_sleep, seconds)
            else:
                run = (await self.client.start(bill_long_hook, token) if shape == "hook" else
                       await self.client.start(bill_long_hook_timeout, token, seconds * 8 / 7))
                await asyncio.sleep(seconds)
                await self.client.resume_hook(token, "1", wait=30)
            await self.result(run)

        async with self.small_time(LONG_SETTINGS):
            result = await self.measure(f"long wait: {shape} @{reaches}", "run", 1, body)
        result.note = str(self.local.poller.deliveries - before)  # the deliveries (read by long_waits_report)
        return result

    async def parked(self, periods: int, reaches: int | None = None) -> Result:
        """One run parked (``AWSWORLD_ON_DIVERGENCE=park``) for ``periods`` redeliveries, on the small time: its
        hook is resumed under a bad deploy (it diverges, recovers three times, is parked), it comes back
        ``periods`` times every ``reaches`` reaches (``PARK_REACHES``, an hour: 4 SQS reaches of 15 minutes; fewer
        in tests/bench/test_bill.py, still beyond one message's reach), the deploy is rolled back, and the next
        redelivery resumes it to its end."""
        reaches = PARK_REACHES if reaches is None else reaches
        assert self.local.poller is not None
        poller = self.local.poller
        before, seen = poller.deliveries, len(poller.results)
        name = workflow_name(bill_parked)
        good = REGISTRY.workflows[name]

        async def body() -> None:
            token = f"bill-parked-{uuid.uuid4().hex}"
            run = await self.client.start(bill_parked, token)
            await self.hook_created(run, token)
            REGISTRY.workflows[name] = WorkflowDef(name, bill_parked_bad_deploy)
            try:
                await self.client.resume_hook(token, "1")
                deadline = time.monotonic() + 60 + periods * reaches * LONG_REACH * 2
                while [r.status for r in poller.results[seen:]].count("parked") < 1 + periods:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"run {run.run_id} was not redelivered {periods} times parked")
                    await asyncio.sleep(0.05)
            finally:
                REGISTRY.workflows[name] = good
            assert await self.result(run) == 2

        async with self.small_time({**LONG_SETTINGS, "AWSWORLD_ON_DIVERGENCE": "park",
                                    "AWSWORLD_PARK_SECONDS": str(reaches * LONG_REACH)}):
            result = await self.measure(f"parked: @{periods}", "run", 1, body)
        result.note = str(poller.deliveries - before)  # the deliveries (read by parked_report)
        return result

    async def tick_body(self) -> Callable[[], Awaitable[None]]:
        async def body() -> None:
            sqs = await self.local.world.clients.sqs()
            await sqs.send_message(QueueUrl=self.local.config.queue_url, MessageBody=TICK_BODY)
        return body

    async def stream(self, n: int) -> Result:
        async def run(chunks: int) -> Callable[[], Awaitable[None]]:
            async def body() -> None:
                assert await self.result(await self.client.start(bill_stream, chunks)) == chunks
            return body
        base = await self.measure("stream (0 chunks)", "chunk", 1, await run(0))
        full = await self.measure("stream", "chunk", n, await run(n))
        return Result("stream", "chunk", n, full.bill - base.bill, base.seconds + full.seconds, None,
                      f"{n} chunks of {CHUNK} B by one step, net of the same run writing none")


# -- the report --------------------------------------------------------------------------------------------


def _per_million(dollars: float, units: int) -> float:
    return dollars / units * 1e6


def report(results: list[Result], backend: str) -> str:
    out = [
        "awsworld bill: us-east-1 on-demand list prices; DynamoDB $0.625/M WRU, $0.125/M RRU; SQS $0.40/M "
        "requests; S3 $0.005/1k PUT/COPY/POST/LIST, $0.0004/1k GET/HEAD, DELETE free.",
        "Not billed: Lambda compute (invocations and GB-s), CloudWatch, storage, data transfer. "
        f"DynamoDB on {backend}; requests metered = the World's own counters (checked per workload).",
        "",
        f"{'per unit':<34}{'DDB req':>8}{'TWI':>6}{'WRU':>7}{'RRU':>6}{'SQS req':>8}{'S3 req':>7}  |"
        f"{'$DDB':>7}{'$SQS':>7}{'$S3':>6}{'$total':>8}  | target ($ per million)",
    ]
    for r in results:
        b, n = r.bill, r.units
        dollars = b.dollars()
        total = sum(dollars.values())
        target = TARGETS.get(r.name)
        mark = "" if target is None else f"<= {target:g} " + ("ok" if _per_million(total, n) <= target else "OVER")
        if r.name in ISSUE_MEASURED:
            mark += f" (issue measured {ISSUE_MEASURED[r.name]:g})"
        out.append(
            f"{r.name + ' (per ' + r.unit + ')':<34}{b.service_requests('dynamodb') / n:>8.2f}"
            f"{b.requests['dynamodb.TransactWriteItems'] / n:>6.2f}{sum(b.wru.values()) / n:>7.2f}"
            f"{sum(b.rru.values()) / n:>6.2f}{sum(b.sqs.values()) / n:>8.2f}{b.service_requests('s3') / n:>7.2f}  |"
            f"{_per_million(dollars['dynamodb'], n):>7.2f}{_per_million(dollars['sqs'], n):>7.2f}"
            f"{_per_million(dollars['s3'], n):>6.2f}{_per_million(total, n):>8.2f}  | {mark}")
    out += [f"{'':<34}{LAMBDA_DURABLE}", "",
            "TWI: TransactWriteItems calls. SQS req: billable requests (64 KB chunks), idle polls excluded; the local "
            "poller deletes each message with DeleteMessage (Lambda's event source mapping batches its deletes).",
            ""]
    kinds = Counter[str]()
    for r in results:
        for (kind, _), units in r.bill.wru.items():
            kinds[kind] += units / r.units
    top = [kind for kind, _ in kinds.most_common(8)]
    out.append(f"{'WRU per unit by item kind':<34}" + "".join(f"{kind:>13}" for kind in top))
    for r in results:
        by_kind = Counter[str]()
        for (kind, _), units in r.bill.wru.items():
            by_kind[kind] += units
        out.append(f"{r.name:<34}" + "".join(f"{by_kind[kind] / r.units:>13.2f}" for kind in top))
    out.append("")
    operations = sorted({op for r in results for op in r.bill.dynamodb_requests()})
    short = {"TransactWriteItems": "TransactW", "BatchWriteItem": "BatchW", "BatchGetItem": "BatchGet",
             "TransactGetItems": "TransactG"}
    out.append(f"{'DynamoDB requests per unit':<34}" + "".join(f"{short.get(op, op):>11}" for op in operations))
    for r in results:
        ops = r.bill.dynamodb_requests()
        out.append(f"{r.name:<34}" + "".join(f"{ops.get(op, 0) / r.units:>11.2f}" for op in operations))
    out += watchdog_report(results)
    out += limits_report(results)
    out += long_waits_report(results)
    out += parked_report(results)
    for r in results:
        b = r.bill
        total = sum(b.dollars().values())
        extra = [f"{r.seconds:.1f} s"]
        if b.idle_receives:
            extra.append(f"{b.idle_receives} idle ReceiveMessage not priced")
        refused = {k: v for k, v in b.errors.items() if v > 0}
        if refused:
            extra.append("answered with an error: " + ", ".join(f"{k} {v}" for k, v in sorted(refused.items())))
        out += ["", f"{r.name}: top cost lines, per {r.unit} (" + "; ".join(extra) + ")"]
        if r.note:
            out.append(f"  {r.note}")
        for what, units, unit, dollars in b.cost_lines()[:8]:
            if dollars <= 0:
                continue
            out.append(f"  {what:<40}{units / r.units:>8.2f} {unit}  ${_per_million(dollars, r.units):>6.2f} "
                       f"per million ({dollars / total:>4.0%})")
    return "\n".join(out)


LIMIT_ROWS = ("keyed run limit", "step concurrency limit", "step rate limit")


def limits_report(results: list[Result]) -> list[str]:
    """What each limit kind adds per run (one step each: per step attempt too), against the same one-step runs
    without a limit; the contended run's cost; and a waiting minute's requests (no polling: none). The WRU leave out
    a run's due moving to the next minute's key (``Bill.due_moves``): the wall clock's luck, not the limit's."""
    base = next((r for r in results if r.name == "one-step run, one at a time"), None)
    rows = [r for r in results if r.name in LIMIT_ROWS]
    if base is None or not rows:
        return []
    out = [f"{'limits across runs (issue 35)':<34}{'+DDB req':>9}{'+WRU':>7}{'+RRU':>7}{'+SQS':>7}{'+$ per M':>10}"]

    def per(b: Bill, n: int) -> tuple[float, float, float, float, float]:
        return (b.service_requests("dynamodb") / n, b.wru_apart_from_due_moves(n) / n, sum(b.rru.values()) / n,
                sum(b.sqs.values()) / n, sum(b.dollars().values()) / n * 1e6)

    zero = per(base.bill, base.units)
    for r in rows:
        mine = per(r.bill, r.units)
        delta = [m - z for m, z in zip(mine, zero, strict=True)]
        out.append(f"{r.name + ' (per run)':<34}{delta[0]:>9.2f}{delta[1]:>7.2f}{delta[2]:>7.2f}{delta[3]:>7.2f}"
                   f"{delta[4]:>10.2f}")
    for r in results:
        if r.name in ("keyed run limit, contended", "step rate limit, waiting"):
            mine = per(r.bill, r.units)
            out.append(f"{r.name + ' (per run)':<34}" + "".join(f"{m - z:>{w}.2f}" for m, z, w in zip(
                mine, zero, (9, 7, 7, 7, 10), strict=True)))
        if r.name == "a run waiting for a slot":
            b = r.bill
            out.append(f"{'a run waiting, per minute':<34}{b.service_requests('dynamodb'):>9.2f}"
                       f"{sum(b.wru.values()):>7.2f}{sum(b.rru.values()):>7.2f}{sum(b.sqs.values()):>7.2f}"
                       f"{sum(b.dollars().values()) * 1e6:>10.2f}  (requests, not a difference)")
    return [*out, ""]


def _scaled(bill: Bill, factor: float) -> Bill:
    """``bill`` times ``factor`` (a window's requests per minute)."""
    def times(counter: Counter[Any]) -> Counter[Any]:
        return Counter({k: v * factor for k, v in counter.items()})
    return Bill(times(bill.requests), times(bill.errors), bill.transaction_items, times(bill.wru), times(bill.rru),
                times(bill.sqs), bill.idle_receives, times(bill.s3), times(bill.kms), bill.head_writes)


LONG_REACH = 1
"""One SQS message's reach in the long-wait rows, in seconds (SQS's is 900 s)."""
LONG_TICK = 0.2
"""The watchdog's tick in the long-wait rows, in seconds (the stack's is 60 s: a fifteenth of the reach; here a
fifth, so the small time's wake lands within reach as the stack's does)."""
LONG_SETTINGS = {"AWSWORLD_WATCH_HORIZON_SECONDS": "2", "AWSWORLD_WATCH_BUCKET_SECONDS": "0.1"}
LONG_SHAPES = {"hook": ("hook, 7 days, no timeout", 7 * 96), "hook_timeout": ("hook, 7 days, 8-day timeout", 7 * 96),
               "sleep": ("sleep, 30 days", 30 * 96)}
"""shape -> (what it stands for, its length in reaches: 96 SQS reaches of 15 minutes a day)."""
LONG_LENGTHS = (6, 12)
"""Both past 4.7 reaches, so the 8-day timeout's wake (10 minutes before it, a day after the resume at 7) comes after
the run ended, as at the real length."""


def long_waits_report(results: list[Result]) -> list[str]:
    """Per long-wait shape: deliveries, DynamoDB requests and WRU, SQS requests, at the two lengths measured and
    extrapolated (linear in the length) to the real one, with its $ per million runs."""
    rows = {r.name: r for r in results if r.name.startswith("long wait: ")}
    if not rows:
        return []
    out = [f"{'long waits (per run)':<34}{'length':>8}{'deliv':>7}{'DDB req':>9}{'WRU':>8}{'RRU':>8}{'SQS req':>9}"
           f"{'$ per M runs':>14}"]

    def figures(r: Result) -> tuple[float, ...]:
        b = r.bill
        return (float(r.note), b.service_requests("dynamodb"), sum(b.wru.values()), sum(b.rru.values()),
                sum(b.sqs.values()), sum(b.dollars().values()) * 1e6)

    for shape, (label, real) in LONG_SHAPES.items():
        # (the shortest and longest lengths measured: ``LONG_LENGTHS`` here, shorter ones in tests/bench/test_bill.py)
        measured = sorted((int(name.rsplit("@", 1)[1]), r) for name, r in rows.items()
                          if name.startswith(f"long wait: {shape} @"))
        if len(measured) < 2:
            continue
        (n_short, short), (n_long, long) = measured[0], measured[-1]
        a, b = figures(short), figures(long)
        # (a wait never costs less for being longer: a drop between the two lengths is noise, such as a write that
        # crossed a KB in one of them, and is not extrapolated)
        per = [max(0.0, (y - x) / (n_long - n_short)) for x, y in zip(a, b, strict=True)]
        at_real = [y + p * (real - n_long) for y, p in zip(b, per, strict=True)]
        for length, row in ((n_short, a), (n_long, b), (real, at_real)):
            name = label if length == real else f"  measured, {length} reaches"
            out.append(f"{name:<34}{length:>8}{row[0]:>7.0f}{row[1]:>9.0f}{row[2]:>8.1f}{row[3]:>8.1f}{row[4]:>9.0f}"
                       f"{row[5]:>14.2f}")
        grew = [what for what, p in zip(("deliveries", "DynamoDB requests", "", "", "SQS requests"), per, strict=False)
                if what and p > 0]
        if grew:  # a wait's bill does not grow with its length: the extrapolation multiplies what did by hundreds
            times = (real - n_long) / (n_long - n_short)
            out.append(f"{'':<34}! {', '.join(grew)} grew from {n_short} to {n_long} reaches, and the "
                       f"row above multiplies that by {times:.0f}: a "
                       "timer that hops (a regression), or a tick or delivery late on a busy machine (the small time's "
                       f"{LONG_TICK} s ticks): run --only longwait again on an idle one before quoting it")
    out.append(f"{'':<34}length in reaches of one SQS message (15 min); the real row is extrapolated from the two "
               "measured ones")
    return [*out, ""]


PARK_REACHES = 4
"""A parked run's period (``AWSWORLD_PARK_SECONDS``, an hour) in reaches of one SQS message (15 minutes)."""
PARKED_PERIODS = (1, 3)
"""The parked row's two measured lengths, in redeliveries while parked; a day is ``PARKED_DAY``."""
PARKED_DAY = 24


def parked_report(results: list[Result]) -> list[str]:
    """A run parked for a day: deliveries, DynamoDB requests and WRU, SQS requests and $ per million runs, at the
    shortest and longest lengths measured (``PARKED_PERIODS``) and extrapolated (linear in the redeliveries) to a
    day's 24."""
    rows = sorted((int(r.name.removeprefix("parked: @")), r) for r in results if r.name.startswith("parked: @"))
    if len(rows) < 2:
        return []
    (n_short, short), (n_long, long) = rows[0], rows[-1]
    out = [f"{'parked run (per run)':<34}{'redeliv':>8}{'deliv':>7}{'DDB req':>9}{'WRU':>8}{'RRU':>8}{'SQS req':>9}"
           f"{'$ per M runs':>14}"]

    def figures(r: Result) -> tuple[float, ...]:
        b = r.bill
        return (float(r.note), b.service_requests("dynamodb"), sum(b.wru.values()), sum(b.rru.values()),
                sum(b.sqs.values()), sum(b.dollars().values()) * 1e6)

    a, b = figures(short), figures(long)
    per = [max(0.0, (y - x) / (n_long - n_short)) for x, y in zip(a, b, strict=True)]
    day = [y + p * (PARKED_DAY - n_long) for y, p in zip(b, per, strict=True)]
    for length, row in ((n_short, a), (n_long, b), (PARKED_DAY, day)):
        name = "parked for a day (hourly)" if length == PARKED_DAY else f"  measured, {length} redeliveries"
        out.append(f"{name:<34}{length:>8}{row[0]:>7.0f}{row[1]:>9.0f}{row[2]:>8.1f}{row[3]:>8.1f}{row[4]:>9.0f}"
                   f"{row[5]:>14.2f}")
    out.append(f"{'':<34}each redelivery while parked: {per[0]:.1f} deliveries, ${per[5]:.2f} per million runs "
               "(the start, the hook, the recoveries and the end are the rest)")
    return [*out, ""]


TICKS_PER_MONTH = 30 * 24 * 60
SCHEDULER_PRICE = 1.00 / 1e6  # EventBridge Scheduler invocations (after 14 million free a month)
LAMBDA_REQUEST_PRICE = 0.20 / 1e6
LAMBDA_GB_SECOND_PRICE = 0.0000166667
TICK_LAMBDA_SECONDS = 0.1  # an estimate: a tick's invocation on a warm 1 GB flow function


def watchdog_report(results: list[Result]) -> list[str]:
    """The watchdog's share: per run (each workload is one run), and the schedule's fixed cost per month."""
    out = [f"{'watchdog per run (issue 21)':<34}{'byDue WRU':>10}{'head wr':>9}{'head WRU':>9}{'$ per M runs':>13}"]
    for r in results:
        if r.unit in ("tick", "wake"):
            continue
        index, head = r.bill.watch_wru()
        out.append(f"{r.name:<34}{index:>10.2f}{r.bill.head_writes:>9}{head:>9.2f}"
                   f"{(index + head) * WRU_PRICE * 1e6:>13.2f}")
    for r in results:
        if r.unit not in ("tick", "wake"):
            continue
        b = r.bill
        out.append(f"{r.name:<34}DynamoDB {b.service_requests('dynamodb')} req, {sum(b.wru.values()):.1f} WRU, "
                   f"{sum(b.rru.values()):.1f} RRU; SQS {sum(b.sqs.values())} req; "
                   f"${sum(b.dollars().values()) * 1e6:.2f} per million")
        if r.unit == "tick":
            metered = sum(b.dollars().values()) * TICKS_PER_MONTH
            fixed = TICKS_PER_MONTH * (SCHEDULER_PRICE + LAMBDA_REQUEST_PRICE
                                       + TICK_LAMBDA_SECONDS * LAMBDA_GB_SECOND_PRICE)
            out.append(f"{'':<34}at rate(1 minute): ${metered:.3f}/month metered (DynamoDB, SQS) + ${fixed:.3f} "
                       f"Scheduler and Lambda (not metered; {TICK_LAMBDA_SECONDS:g} s at 1 GB assumed)")
    return [*out, ""]


async def run_all(quick: bool, backend: str, only: set[str] | None = None, encrypt: bool = False) -> list[Result]:
    n, fan, chunks = (20, 16, 20) if quick else (100, 64, 100)
    results: list[Result] = []
    async with LocalAWS(dynamodb=backend, encrypt_payloads=encrypt) as local:  # type: ignore[arg-type]
        harness = Harness(local)
        try:
            plan: list[tuple[str, Callable[[], Awaitable[Result]]]] = [
                ("tiny", lambda: harness.serial(n)),
                ("realistic", lambda: harness.values(n, "realistic")),
                ("incompressible", lambda: harness.values(n, "incompressible")),
                ("fanout", lambda: harness.fan_out(fan)),
                ("bounded", lambda: harness.bounded_fan_out(fan, max(2, fan // 4))),
                ("sleephook", harness.sleep_hook),
                ("resumehook", harness.workflow_resume),
                ("resumehook", harness.workflow_resume_waiting),
                ("stream", lambda: harness.stream(chunks)),
                ("tick", harness.tick),
                ("wake", harness.false_wake),
                ("started", lambda: harness.started_runs(n)),
                ("scheduled", lambda: harness.scheduled_runs(n)),
                ("limits", lambda: harness.limited_runs(
                    "one-step run, one at a time", n, lambda i: harness.client.start(bill_one_step, i))),
                ("limits", lambda: harness.limited_runs(
                    "keyed run limit", n, lambda i: harness.client.start(bill_keyed_run, f"key-{i}", i))),
                ("limits", lambda: harness.limited_runs(
                    "step concurrency limit", n, lambda i: harness.client.start(bill_limited_step, i))),
                ("limits", lambda: harness.limited_runs(
                    "step rate limit", n, lambda i: harness.client.start(bill_rated_step, i))),
                ("limits", lambda: harness.contended_runs(max(10, n // 5))),
                ("limits", lambda: harness.rated_runs(max(10, n // 5))),
                ("limits", lambda: harness.waiting_minute(20.0)),
                *[("longwait", lambda shape=shape, n=n: harness.long_wait(shape, n))
                  for shape in LONG_SHAPES for n in LONG_LENGTHS],
                *[("parked", lambda n=n: harness.parked(n)) for n in PARKED_PERIODS],
            ]
            for key, workload in plan:
                if only is None or key in only:
                    results.append(await workload())
            wrong = harness.meter.verify()
            if wrong:
                raise AssertionError(f"the meter missed writes: {len(wrong)} items differ, e.g. {wrong[:3]}")
            HEADS.append(harness.meter.largest_head)
        finally:
            await harness.close()
    return results


HEADS: list[int] = []
"""The largest run head (bytes) any write of each ``run_all`` left: it must stay under 1 KB."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20 serial steps, a 16-way fan-out, 20 chunks")
    parser.add_argument("--dynamodb", choices=("moto", "dynamodb-local"), default="moto")
    parser.add_argument("--only", help="comma-separated: tiny,realistic,incompressible,fanout,sleephook,"
                                       "resumehook,stream,tick,wake,started,scheduled,limits,longwait,parked")
    parser.add_argument("--encrypt", action="store_true",
                        help="per-run payload encryption on (a KMS key on the emulator; KMS requests billed)")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    results = asyncio.run(run_all(args.quick, args.dynamodb, only, args.encrypt))
    print(report(results, args.dynamodb + (", payloads encrypted" if args.encrypt else "")))
    print(f"\nlargest run head any write left: {max(HEADS, default=0)} bytes (a transaction bills it 2 WRU up to 1 KB)")


if __name__ == "__main__":
    main()
