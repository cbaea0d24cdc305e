"""A faster ``TransactWriteItems`` and ``Query`` for moto's DynamoDB, with the same behaviour.

moto's ``DynamoDBBackend.transact_write_items`` deep-copies every table a transaction names before it starts,
so it can put the copy back if the transaction is cancelled. That costs time proportional to the table: a
few milliseconds at a hundred items, tens at a thousand, and it grows without bound as a local run log
fills. awsworld writes every event with one transaction, so the embedded emulator slowed down as it was used.

``transact_write_items`` below is moto 5.2's code with one change: instead of copying whole tables it
journals only the items the transaction touches (a deep copy of each one, or a marker that it was absent,
taken before the first write to it) and, on cancellation, restores exactly those. Validation errors,
``ConditionalCheckFailed`` reasons (with ``ALL_OLD`` items) and the all-or-nothing outcome are unchanged.
Two deliberate differences, both towards what DynamoDB does: a table named by its ARN is rolled back too
(moto only backs up tables named by name), and a malformed item (two operations in one entry) rolls back
the entries already applied before the error is raised (moto raises without rolling back).

Item order inside moto's dicts can change after a rollback that re-inserts a deleted item; moto sorts every
Query and Scan result by key, so the order is not observable through the API.

``Table.query`` below wraps moto's: for a query of the table itself (not an index) by a string or binary
partition key, moto's code runs on a view of the table whose ``all_items()`` is that partition's items. moto
builds a Query's candidates from ``all_items()``, every item of the table, sorted, and keeps those of the
partition: a Query cost time proportional to the whole table (every run a local session has made), not to the
partition it reads. The view yields exactly the items moto would have kept, and moto sorts them by range key
next, so results, pages and ``LastEvaluatedKey`` are unchanged. (A numeric key, whose equal values may differ in
spelling, goes to moto's code as it is.)

An index query (the run listings by status and by workflow, the watchdog's due runs, every few seconds under
``dev``) runs on a view whose ``all_items()`` is unsorted and, for a string or binary index key, holds only the items
whose index key attributes equal the query's: moto sorted the whole table by its own keys before it kept an
index's candidates, and then sorts the candidates again by the index's keys and the table's, a total order, so
the order it was handed does not show. At 10,000 items one index query cost a second under the lock every
DynamoDB request waits for (``moto_server.py``), which made a ``dev`` with many runs crawl.

The patches are installed once per process and can be switched off (``set_enabled(False)``) so the benchmark
can compare them with moto's own implementation on the same server.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table

_ABSENT = object()
_enabled = True
_original = None  # moto's own implementation, kept for set_enabled(False) and for tests
_original_query = Table.query
_QUERY_SIGNATURE = inspect.signature(Table.query)


class _Journal:
    """What the touched items looked like before the transaction, and how to put them back."""

    def __init__(self) -> None:
        # (id(table), hash, range) -> (table, hash, range, bucket_existed, saved item or _ABSENT)
        self._items: dict[tuple[int, Any, Any], tuple[Table, Any, Any, bool, Any]] = {}
        # id(table) -> (shard, the shard's record list, its length): stream records to drop on rollback
        self._streams: dict[int, tuple[Any, list[Any], int]] = {}

    def save(self, backend: DynamoDBBackend, table_name: str, key: dict[str, Any]) -> None:
        # Raises exactly what backend.get_item(table_name, key) raises (it is called next, with the same
        # arguments), so recording never changes which error a bad entry reports.
        table = backend.get_table(table_name)
        hash_value, range_value = backend.get_keys_value(table, key)
        slot = (id(table), hash_value, range_value)
        if slot in self._items:
            return
        if table.stream_shard is not None and id(table) not in self._streams:
            shard = table.stream_shard
            self._streams[id(table)] = (shard, shard.items, len(shard.items))
        bucket_existed = hash_value in table.items
        if range_value is not None:
            current = table.items[hash_value].get(range_value, _ABSENT) if bucket_existed else _ABSENT
        else:
            current = table.items.get(hash_value, _ABSENT)
        saved = _ABSENT if current is _ABSENT else copy.deepcopy(current)
        self._items[slot] = (table, hash_value, range_value, bucket_existed, saved)

    def rollback(self) -> None:
        for table, hash_value, range_value, _, saved in self._items.values():
            if range_value is None:
                if saved is _ABSENT:
                    table.items.pop(hash_value, None)
                else:
                    table.items[hash_value] = saved
            elif saved is _ABSENT:
                table.items[hash_value].pop(range_value, None)
            else:
                table.items[hash_value][range_value] = saved
        # Reads of a missing item create an empty hash bucket (table.items is a defaultdict): drop the ones
        # this transaction created, as restoring moto's table copy would.
        for table, hash_value, range_value, bucket_existed, _ in self._items.values():
            if range_value is not None and not bucket_existed and not table.items.get(hash_value, True):
                del table.items[hash_value]
        for shard, records, length in self._streams.values():
            if shard.items is records:
                del records[length:]
            else:  # the shard handed its records to a Lambda mapping and started a new list
                shard.items = records[:length]


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    if not _enabled:
        assert _original is not None
        return _original(self, transact_items)
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    for item in transact_items:
        # moto's backup loop without the copy: a malformed entry fails here, before any write, as it does there.
        _, op = next(iter(item.items()))
        op.get("TableName")
    journal = _Journal()

    target_items: set[tuple[str, str]] = set()

    def check_unicity(table_name: str, key: dict[str, Any]) -> None:
        item = (str(table_name), str(dict(sorted(key.items()))))
        if item in target_items:
            raise MultipleTransactionsException()
        target_items.add(item)

    errors: list[tuple[str, str, dict[str, Any]] | tuple[None, None, None]] = []  # [(Code, Message, Item), ..]
    for item in transact_items:
        original_item: dict[str, Any] | None = None
        # Check transact writes are not performing multiple operations on the same item
        if len(list(item.keys())) > 1:
            journal.rollback()
            raise TransactWriteSingleOpException

        try:
            op_type, op = next(iter(item.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                raise ValueError("Unsupported transaction operation")

            table_name = op["TableName"]
            condition_expression = op.get("ConditionExpression")
            expression_attribute_names = op.get("ExpressionAttributeNames")
            expression_attribute_values = op.get("ExpressionAttributeValues")
            return_values_on_condition_check_failure = op.get("ReturnValuesOnConditionCheckFailure")

            if op_type == "Put":
                attrs = op["Item"]
                table = self.get_table(table_name)
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]

            check_unicity(table_name, key)

            journal.save(self, table_name, key)
            current = self.get_item(table_name, key)
            if condition_expression is not None:
                condition_op = get_filter_expression(
                    condition_expression,
                    expression_attribute_names,
                    expression_attribute_values,
                )
                if not condition_op.expr(current):
                    if return_values_on_condition_check_failure == "ALL_OLD" and current:
                        original_item = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original_item)

            if op_type == "Put":
                attrs = op["Item"]
                self.put_item(
                    table_name,
                    attrs,
                    condition_expression=condition_expression,
                    expression_attribute_names=expression_attribute_names,
                    expression_attribute_values=expression_attribute_values,
                )
            elif op_type == "Delete":
                self.delete_item(
                    table_name,
                    key,
                    condition_expression=condition_expression,
                    expression_attribute_names=expression_attribute_names,
                    expression_attribute_values=expression_attribute_values,
                )
            elif op_type == "Update":
                update_expression = op["UpdateExpression"]
                self.update_item(
                    table_name,
                    key,
                    update_expression=update_expression,
                    condition_expression=condition_expression,
                    expression_attribute_names=expression_attribute_names,
                    expression_attribute_values=expression_attribute_values,
                )
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            # Rollback to the original state, and reraise the error
            journal.rollback()
            raise
        except ConditionalCheckFailed as e:
            errors.append(("ConditionalCheckFailed", str(e.message), original_item))  # type: ignore
        except Exception as e:
            # For other exceptions, capture their details
            errors.append((type(e).__name__, str(e), original_item))  # type: ignore

    if any(code is not None for code, _, _ in errors):
        # Rollback to the original state, and reraise the errors
        journal.rollback()
        raise TransactionCanceledException(errors)


class _Partition:
    """A table as one partition's Query sees it: ``all_items()`` is the partition's items, the rest is the table."""

    def __init__(self, table: Table, hash_key: Any) -> None:
        self._table = table
        self._hash_key = hash_key

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)

    def all_items(self) -> list[Any]:
        return list(self._table.items.get(self._hash_key, {}).values())


def table_items(table: Table) -> Iterator[Any]:
    """Every item of moto's ``table``, unsorted (moto keeps a table with a range key as a dict of partitions)."""
    items: dict[Any, Any] = table.items
    if table.range_key_attr:
        return (item for partition in items.values() for item in partition.values())
    return iter(items.values())


class _IndexCandidates(_Partition):
    """A table as an index Query sees it: ``all_items()`` is every item that may be in the index's partition,
    unsorted (moto sorts what it keeps by the index's keys and the table's)."""

    def __init__(self, table: Table, conditions: list[tuple[str, Any]]) -> None:
        super().__init__(table, None)
        self._conditions = [(name, value.type, value.value) for name, value in conditions
                            if getattr(value, "type", None) in ("S", "B")]  # a number's spelling may differ

    def all_items(self) -> list[Any]:
        conditions = self._conditions
        return [item for item in table_items(self._table) if all(
            (found := item.attrs.get(name)) is not None and found.type == kind and found.value == value
            for name, kind, value in conditions)]


def query(self: Table, *args: Any, **kwargs: Any) -> Any:
    """moto's ``Table.query`` on the partition alone, or an index's candidates alone (see the module's docstring)."""
    call = _QUERY_SIGNATURE.bind(self, *args, **kwargs).arguments
    if not _enabled:
        return _original_query(self, *args, **kwargs)
    if call.get("index_name"):
        view = _IndexCandidates(self, call.get("hash_key_conditions") or [])
        return _original_query(view, *args, **kwargs)  # pyright: ignore[reportArgumentType]
    hash_key = call.get("hash_key")
    if not self.range_key_attr or getattr(hash_key, "type", None) not in ("S", "B"):
        return _original_query(self, *args, **kwargs)
    return _original_query(_Partition(self, hash_key), *args, **kwargs)  # pyright: ignore[reportArgumentType]


def install() -> None:
    """Replace moto's implementations (once per process; later calls do nothing)."""
    global _original
    if DynamoDBBackend.transact_write_items is transact_write_items:
        return
    _original = DynamoDBBackend.transact_write_items
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    Table.query = query  # type: ignore[method-assign]


def set_enabled(enabled: bool) -> None:
    """Switch between the patched implementations (default) and moto's own (the table copy, the whole-table
    Query; for comparison)."""
    global _enabled
    _enabled = enabled


def is_enabled() -> bool:
    return _enabled and DynamoDBBackend.transact_write_items is transact_write_items


@contextmanager
def enabled(flag: bool) -> Iterator[None]:
    """Run a block with the journaling implementation on or off, then restore the previous setting."""
    before = _enabled
    set_enabled(flag)
    try:
        yield
    finally:
        set_enabled(before)


def original() -> Any:
    """moto's own ``transact_write_items`` (installed or not)."""
    return _original if _original is not None else DynamoDBBackend.transact_write_items


def original_query() -> Any:
    """moto's own ``Table.query`` (installed or not)."""
    return _original_query
