"""The journaling ``TransactWriteItems`` behaves exactly like moto's own, without copying the table.

Every test talks to the session's embedded moto server over HTTP (the path awsworld uses) and inspects moto's
in-process table where the API cannot show a difference.
"""

from __future__ import annotations

import copy
import inspect
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.dynamodb.models.dynamo_type import DynamoType

from awsworld.aws.resources import (
    GSI_BY_DUE,
    GSI_BY_STATUS,
    GSI_BY_WORKFLOW,
    GSI_DUE_KEY,
    GSI_DUE_SHARD,
    GSI_RUN_KEY,
    GSI_STATUS_KEY,
    GSI_WORKFLOW_KEY,
)
from awsworld.local import DUMMY_CREDENTIALS, moto_patch
from awsworld.local.moto_server import MotoServer, moto_table
from awsworld.local.provision import create_table_parameters

KEY_SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
ATTRIBUTES = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}]


@pytest.fixture(scope="module")
def ddb(moto_server: MotoServer) -> Any:
    return boto3.client("dynamodb", endpoint_url=moto_server.endpoint_url, region_name="us-east-1",
                        **DUMMY_CREDENTIALS)  # type: ignore[arg-type]


@pytest.fixture
def table(ddb: Any) -> Iterator[str]:
    name = f"patch-{uuid.uuid4().hex[:10]}"
    ddb.create_table(TableName=name, KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTES,
                     BillingMode="PAY_PER_REQUEST")
    yield name
    ddb.delete_table(TableName=name)




def key(pk: str, sk: str = "1") -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def put(table: str, pk: str, sk: str = "1", condition: str | None = None, **attrs: Any) -> dict[str, Any]:
    op: dict[str, Any] = {"TableName": table, "Item": {**key(pk, sk), **attrs}}
    if condition:
        op["ConditionExpression"] = condition
    return {"Put": op}


def scan(ddb: Any, table: str) -> list[dict[str, Any]]:
    items = ddb.scan(TableName=table, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))


def buckets(table: str) -> dict[str, list[str]]:
    """moto's hash buckets, including empty ones (invisible to the API, but part of "restored exactly")."""
    items = moto_table(table).items
    return {str(h.value): sorted(str(r.value) for r in bucket) for h, bucket in items.items()}


def outcome(ddb: Any, transact_items: list[dict[str, Any]]) -> Any:
    try:
        ddb.transact_write_items(TransactItems=transact_items)
        return "ok"
    except ClientError as error:
        return (error.response["Error"]["Code"], error.response["Error"]["Message"],
                error.response.get("CancellationReasons"))


SEED = [
    {**key("a", "1"), "n": {"N": "1"}, "m": {"M": {"x": {"L": [{"N": "1"}, {"S": "y"}]}}},
     "tags": {"SS": ["p", "q"]}},
    {**key("a", "2"), "status": {"S": "running"}},
    {**key("c", "1"), "blob": {"B": b"\x00\x01"}},
]


def scenarios(t: str) -> list[list[dict[str, Any]]]:
    fail_on_a = {"ConditionCheck": {"TableName": t, "Key": key("a", "1"), "ConditionExpression": "n = :x",
                                    "ExpressionAttributeValues": {":x": {"N": "99"}},
                                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}
    return [
        # Succeeds: update, insert, delete.
        [{"Update": {"TableName": t, "Key": key("a", "1"), "UpdateExpression": "SET n = n + :one",
                     "ConditionExpression": "n = :one", "ExpressionAttributeValues": {":one": {"N": "1"}}}},
         put(t, "d", condition="attribute_not_exists(pk)", v={"S": "new"}),
         {"Delete": {"TableName": t, "Key": key("c", "1")}}],
        # Cancelled by a failed condition with ALL_OLD after an update, a new item and a delete were applied.
        [{"Update": {"TableName": t, "Key": key("a", "2"), "UpdateExpression": "SET #s = :s, extra = :s",
                     "ExpressionAttributeNames": {"#s": "status"},
                     "ExpressionAttributeValues": {":s": {"S": "done"}}}},
         put(t, "e", v={"S": "never"}),
         {"Delete": {"TableName": t, "Key": key("d", "1")}},
         fail_on_a],
        # Cancelled by a condition on a missing item (its reason carries no Item), after an insert.
        [put(t, "f", v={"N": "1"}),
         {"ConditionCheck": {"TableName": t, "Key": key("g"), "ConditionExpression": "attribute_exists(pk)",
                             "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}],
        # An Update that creates an item, then a failure: the created item must vanish.
        [{"Update": {"TableName": t, "Key": key("k"), "UpdateExpression": "SET v = :v",
                     "ExpressionAttributeValues": {":v": {"S": "k"}}}},
         {"Delete": {"TableName": t, "Key": key("a", "2"), "ConditionExpression": "#s = :no",
                     "ExpressionAttributeNames": {"#s": "status"},
                     "ExpressionAttributeValues": {":no": {"S": "nope"}},
                     "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}],
        # A validation error (wrong key type) after a write: ValidationException, rolled back.
        [put(t, "h"), {"Put": {"TableName": t, "Item": {"pk": {"S": "h2"}, "sk": {"N": "1"}}}}],
        # Two operations on one item: ValidationException, rolled back.
        [put(t, "i"), put(t, "j"), {"Delete": {"TableName": t, "Key": key("i")}}],
        # An operation on a missing table is a cancellation reason of its own.
        [put(t, "l"), {"Delete": {"TableName": "no-such-table", "Key": key("x")}}],
        # Delete an existing item, then fail: the deleted item comes back unchanged.
        [{"Delete": {"TableName": t, "Key": key("a", "1")}},
         {"ConditionCheck": {"TableName": t, "Key": key("a", "2"), "ConditionExpression": "attribute_not_exists(pk)",
                             "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}],
        # Succeeds again: the table is still usable after all the rollbacks.
        [put(t, "m", condition="attribute_not_exists(pk)")],
    ]


def run_scenarios(ddb: Any, table: str) -> list[Any]:
    for item in SEED:
        ddb.put_item(TableName=table, Item=item)
    trace = []
    for transact_items in scenarios(table):
        trace.append((outcome(ddb, transact_items), scan(ddb, table), buckets(table)))
    return trace


def test_same_outcomes_and_state_as_moto(ddb: Any, table: str) -> None:
    with moto_patch.enabled(True):
        patched = run_scenarios(ddb, table)
    ddb.delete_table(TableName=table)
    ddb.create_table(TableName=table, KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTES,
                     BillingMode="PAY_PER_REQUEST")
    with moto_patch.enabled(False):
        original = run_scenarios(ddb, table)
    for step, (mine, theirs) in enumerate(zip(patched, original, strict=True)):
        assert mine == theirs, f"scenario {step} differs"
    # The scenarios cover what they claim to.
    codes = [result if result == "ok" else result[0] for result, _, _ in patched]
    assert codes == ["ok", "TransactionCanceledException", "TransactionCanceledException",
                     "TransactionCanceledException", "ValidationException", "ValidationException",
                     "TransactionCanceledException", "TransactionCanceledException", "ok"]


def test_rollback_restores_touched_items_exactly(ddb: Any, table: str) -> None:
    for item in SEED:
        ddb.put_item(TableName=table, Item=item)
    before, before_buckets = scan(ddb, table), buckets(table)
    result = outcome(ddb, [
        {"Update": {"TableName": table, "Key": key("a", "1"), "UpdateExpression": "SET n = :v REMOVE m",
                    "ExpressionAttributeValues": {":v": {"N": "7"}}}},
        {"Delete": {"TableName": table, "Key": key("c", "1")}},
        put(table, "new", v={"S": "absent before"}),
        {"ConditionCheck": {"TableName": table, "Key": key("a", "2"), "ConditionExpression": "#s = :done",
                            "ExpressionAttributeNames": {"#s": "status"},
                            "ExpressionAttributeValues": {":done": {"S": "done"}}}},
    ])
    assert result[0] == "TransactionCanceledException"
    assert scan(ddb, table) == before
    assert buckets(table) == before_buckets  # the item that did not exist left no trace, not even a bucket
    assert "new" not in buckets(table)


def test_all_old_reasons_come_back(ddb: Any, table: str) -> None:
    for item in SEED:
        ddb.put_item(TableName=table, Item=item)
    code, _, reasons = outcome(ddb, [
        put(table, "z"),
        {"Update": {"TableName": table, "Key": key("a", "2"), "UpdateExpression": "SET #s = :s",
                    "ConditionExpression": "#s = :expected", "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": {":s": {"S": "x"}, ":expected": {"S": "done"}},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
    ])
    assert code == "TransactionCanceledException"
    assert reasons[0] == {"Code": "None"}
    assert reasons[1]["Code"] == "ConditionalCheckFailed"
    assert reasons[1]["Item"] == SEED[1]


def fill(table: str, count: int) -> None:
    """Put ``count`` event-like items straight into moto's table (through HTTP this takes far longer)."""
    moto = moto_table(table)
    for i in range(len(moto.all_items()), count):
        moto.put_item({"pk": {"S": f"RUN#{i // 100}"}, "sk": {"S": f"EVT#{i % 100:026d}"},
                       "type": {"S": "step_completed"}, "data": {"S": "x" * 200}})


def transaction(table: str, n: int) -> list[dict[str, Any]]:
    run = "RUN#bench"
    return [
        {"Update": {"TableName": table, "Key": {"pk": {"S": run}, "sk": {"S": "RUN"}},
                    "UpdateExpression": "SET seq = :next",
                    "ConditionExpression": "attribute_not_exists(seq) OR seq = :seq",
                    "ExpressionAttributeValues": {":seq": {"N": str(n)}, ":next": {"N": str(n + 1)}}}},
        put(table, run, f"EVT#{n + 1:026d}", condition="attribute_not_exists(pk)", type={"S": "step_created"}),
        put(table, run, f"STEP#{n}", status={"S": "pending"}),
    ]


def count_deepcopies(action: Callable[[], Any]) -> int:
    """How many objects ``copy.deepcopy`` visits (it recurses through the module global) during ``action``."""
    calls = 0
    real = copy.deepcopy

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    copy.deepcopy = counting
    try:
        action()
    finally:
        copy.deepcopy = real
    return calls


@pytest.mark.parametrize("enabled", [True, False], ids=["patched", "moto"])
def test_copy_work_per_transaction(ddb: Any, table: str, enabled: bool) -> None:
    """Deterministic: the patched transaction copies the same objects at 100 and 10,000 items; moto's grows."""
    copies = {}
    with moto_patch.enabled(enabled):
        fill(table, 100)
        ddb.transact_write_items(TransactItems=transaction(table, 0))  # the run item exists from now on
        for n, size in enumerate((100, 1_000) if not enabled else (100, 10_000), start=1):
            fill(table, size)
            copies[size] = count_deepcopies(lambda n=n: ddb.transact_write_items(TransactItems=transaction(table, n)))
    if enabled:
        assert copies[100] == copies[10_000]
        assert copies[100] < 200
    else:
        assert copies[1_000] > 5 * copies[100]


def test_transaction_time_is_flat(ddb: Any, table: str) -> None:
    def median_ms(offset: int) -> float:
        samples = []
        for n in range(offset, offset + 15):
            start = time.perf_counter()
            ddb.transact_write_items(TransactItems=transaction(table, n))
            samples.append(time.perf_counter() - start)
        return sorted(samples)[len(samples) // 2] * 1000

    with moto_patch.enabled(True):
        fill(table, 100)
        small = median_ms(0)
        fill(table, 10_000)
        large = median_ms(15)
    assert large < 5 * small, f"{small:.2f} ms at 100 items, {large:.2f} ms at 10,000"


def test_install_is_idempotent_and_moto_unchanged() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    moto_patch.install()
    moto_patch.install()
    assert DynamoDBBackend.transact_write_items is moto_patch.transact_write_items
    # The patch copies moto 5.2's transact_write_items line for line (except the backup): if a moto upgrade
    # changes the original, re-read it and port the change before updating this line count.
    source = inspect.getsource(moto_patch.original())
    assert "copy.deepcopy" in source and len(source.splitlines()) == 113


@pytest.mark.parametrize("enabled", [True, False], ids=["patched", "moto"])
def test_rollback_drops_stream_records(ddb: Any, enabled: bool) -> None:
    name = f"stream-{uuid.uuid4().hex[:8]}"
    ddb.create_table(TableName=name, KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTES,
                     BillingMode="PAY_PER_REQUEST",
                     StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    try:
        ddb.put_item(TableName=name, Item=SEED[0])
        with moto_patch.enabled(enabled):
            result = outcome(ddb, [put(name, "s1"), {"Delete": {"TableName": name, "Key": key("a", "1")}},
                                   {"ConditionCheck": {"TableName": name, "Key": key("nope"),
                                                       "ConditionExpression": "attribute_exists(pk)"}}])
            assert result[0] == "TransactionCanceledException"
            assert [r.record["eventName"] for r in moto_table(name).stream_shard.items] == ["INSERT"]
            ddb.transact_write_items(TransactItems=[put(name, "s2")])
            assert [r.record["eventName"] for r in moto_table(name).stream_shard.items] == ["INSERT", "INSERT"]
    finally:
        ddb.delete_table(TableName=name)


QUERIES: list[dict[str, Any]] = [
    {"KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": {"S": "RUN#3"}}},
    {"KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi", "ExpressionAttributeValues": {
        ":pk": {"S": "RUN#3"}, ":lo": {"S": "EVT#" + "0" * 24 + "10"}, ":hi": {"S": "EVT#" + "0" * 24 + "40"}}},
    {"KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)", "ExpressionAttributeValues": {
        ":pk": {"S": "RUN#3"}, ":p": {"S": "EVT#"}}, "ScanIndexForward": False, "Limit": 7},
    {"KeyConditionExpression": "pk = :pk AND sk > :lo", "ExpressionAttributeValues": {
        ":pk": {"S": "RUN#3"}, ":lo": {"S": "EVT#" + "0" * 24 + "90"}, ":t": {"S": "step_completed"}},
     "FilterExpression": "#t = :t", "ExpressionAttributeNames": {"#t": "type"}, "Limit": 4},
    {"KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": {"S": "RUN#nothing"}}},
    {"KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": {"S": "RUN#5"}},
     "ProjectionExpression": "sk, #t", "ExpressionAttributeNames": {"#t": "type"}, "Limit": 30},
]


def all_pages(ddb: Any, table: str, query: dict[str, Any]) -> list[dict[str, Any]]:
    pages, start = [], None
    while True:
        response = ddb.query(TableName=table, **query, **({"ExclusiveStartKey": start} if start else {}))
        pages.append({k: response.get(k) for k in ("Items", "Count", "ScannedCount", "LastEvaluatedKey")})
        start = response.get("LastEvaluatedKey")
        if not start:
            return pages


def assert_pages_as_moto(ddb: Any, table: str, query: dict[str, Any]) -> None:
    """Every page of ``query`` is the same with awsworld's patch as with moto's own code."""
    with moto_patch.enabled(True):
        patched = all_pages(ddb, table, query)
    with moto_patch.enabled(False):
        original = all_pages(ddb, table, query)
    assert patched == original and len(patched) >= 1


@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_query_answers_exactly_as_moto(ddb: Any, table: str, query: dict[str, Any]) -> None:
    """Every page (items, counts, the key to go on from) is the same with the partition-only Query and moto's."""
    fill(table, 1_000)  # 10 partitions of 100 events
    assert_pages_as_moto(ddb, table, query)


def test_a_query_reads_its_partition_not_the_table(table: str) -> None:
    """Deterministic: the items a Query's candidates are built from, at 1,000 and 10,000 items in the table."""
    moto = moto_table(table)
    seen = {}
    for size in (1_000, 10_000):
        fill(table, size)
        with moto_patch.enabled(True):
            calls: list[int] = []
            real = type(moto).all_items

            def counting(self: Any, real: Any = real, calls: list[int] = calls) -> list[Any]:
                items = real(self)
                calls.append(len(items))
                return items

            type(moto).all_items = counting  # moto's own all_items: the patched Query must not call it
            try:
                hash_key = next(iter(moto.items))
                moto.query(hash_key, None, [], 10, None, True, None)
            finally:
                type(moto).all_items = real
        seen[size] = sum(calls)
    assert seen == {1_000: 0, 10_000: 0}


@pytest.fixture
def indexed_table(ddb: Any) -> Iterator[str]:
    """A table with awsworld's indexes, filled straight into moto: 1,000 event items (no index keys) and 300 run
    items spread over three statuses, two workflows and due keys in three shards (some runs without them)."""
    name = f"patch-{uuid.uuid4().hex[:10]}"
    ddb.create_table(**create_table_parameters(name))
    fill(name, 1_000)
    moto = moto_table(name)
    for i in range(300):
        due = {GSI_DUE_SHARD: {"S": str(i % 3)}, GSI_DUE_KEY: {"S": f"2026-12-06T{i % 24:02d}:{i % 60:02d}"}} \
            if i % 4 else {}
        moto.put_item({"pk": {"S": f"RUN#r{i:04d}"}, "sk": {"S": "RUN"}, GSI_STATUS_KEY: {"S": STATUSES[i % 3]},
                       GSI_WORKFLOW_KEY: {"S": f"app.w{i % 2}"}, GSI_RUN_KEY: {"S": f"wrun_{(i * 7919) % 300:05d}"},
                       **due})
    yield name
    ddb.delete_table(TableName=name)


STATUSES = ("pending", "running", "completed")
INDEX_QUERIES: list[dict[str, Any]] = [
    {"IndexName": GSI_BY_STATUS, "KeyConditionExpression": "#k = :v", "ExpressionAttributeNames": {
        "#k": GSI_STATUS_KEY}, "ExpressionAttributeValues": {":v": {"S": "running"}}, "Limit": 30},
    {"IndexName": GSI_BY_STATUS, "KeyConditionExpression": "#k = :v", "ExpressionAttributeNames": {
        "#k": GSI_STATUS_KEY}, "ExpressionAttributeValues": {":v": {"S": "pending"}}, "ScanIndexForward": False,
     "Limit": 17},
    {"IndexName": GSI_BY_WORKFLOW, "KeyConditionExpression": "#k = :v AND #r > :r", "ExpressionAttributeNames": {
        "#k": GSI_WORKFLOW_KEY, "#r": GSI_RUN_KEY}, "ExpressionAttributeValues": {
        ":v": {"S": "app.w1"}, ":r": {"S": "wrun_00100"}}, "Limit": 25},
    {"IndexName": GSI_BY_DUE, "KeyConditionExpression": "#k = :v AND #d <= :d", "ExpressionAttributeNames": {
        "#k": GSI_DUE_SHARD, "#d": GSI_DUE_KEY}, "ExpressionAttributeValues": {
        ":v": {"S": "1"}, ":d": {"S": "2026-12-06T12"}}, "Limit": 9},
    {"IndexName": GSI_BY_STATUS, "KeyConditionExpression": "#k = :v", "ExpressionAttributeNames": {
        "#k": GSI_STATUS_KEY}, "ExpressionAttributeValues": {":v": {"S": "cancelled"}}},
]


@pytest.mark.parametrize("query", INDEX_QUERIES, ids=range(len(INDEX_QUERIES)))
def test_an_index_query_answers_exactly_as_moto(ddb: Any, indexed_table: str, query: dict[str, Any]) -> None:
    """Every page of an index Query (items, counts, the key to go on from, in both directions) is the same on the
    index's candidates alone, unsorted, as on moto's sorted whole table."""
    assert_pages_as_moto(ddb, indexed_table, query)


def test_an_index_query_does_not_sort_the_table(indexed_table: str) -> None:
    """Deterministic: moto's Query sorted every item of the table (1,300 here) before it kept an index's; the
    patched one hands it only the index partition's items (100 runs of one status)."""
    moto = moto_table(indexed_table)
    handed: dict[bool, list[int]] = {}
    real = moto_patch.original_query()
    for enabled in (True, False):
        calls = handed[enabled] = []

        def counting(self: Any, *args: Any, calls: list[int] = calls, **kwargs: Any) -> Any:
            calls.append(len(self.all_items()))
            return real(self, *args, **kwargs)

        with moto_patch.enabled(enabled), mock.patch.object(moto_patch, "_original_query", counting):
            moto.query(None, None, [], 10, None, True, None, index_name=GSI_BY_STATUS,
                       hash_key_conditions=[(GSI_STATUS_KEY, DynamoType({"S": "running"}))])
    assert handed == {True: [100], False: [1_300]}
