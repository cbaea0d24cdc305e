"""A thin layer over TransactWriteItems: build operations with named placeholders, run them, and turn a
cancellation into per-operation reasons (with the ALL_OLD item) that the writer maps to contract errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from botocore.exceptions import ClientError

from ..clients import AWSClients
from .items import Item, from_ddb, to_ddb, to_ddb_value

OpKind = Literal["Put", "Update", "Delete", "ConditionCheck"]


@dataclass
class Expr:
    """Collects ``#name``/``:value`` placeholders for one operation's expressions."""

    names: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)

    def n(self, name: str) -> str:
        placeholder = f"#{name}"
        self.names[placeholder] = name
        return placeholder

    def v(self, value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = value
        return placeholder


@dataclass
class TxOp:
    kind: OpKind
    role: str
    key: dict[str, str] | None = None
    item: Item | None = None
    condition: str | None = None
    update: str | None = None
    expr: Expr = field(default_factory=Expr)

    def to_request(self, table: str) -> dict[str, Any]:
        body: dict[str, Any] = {"TableName": table, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        if self.kind == "Put":
            assert self.item is not None
            body["Item"] = to_ddb(self.item)
        else:
            assert self.key is not None
            body["Key"] = to_ddb(self.key)
        if self.update:
            body["UpdateExpression"] = self.update
        if self.condition:
            body["ConditionExpression"] = self.condition
        if self.expr.names:
            body["ExpressionAttributeNames"] = self.expr.names
        if self.expr.values:
            body["ExpressionAttributeValues"] = {k: to_ddb_value(v) for k, v in self.expr.values.items()}
        return {self.kind: body}


def put(role: str, item: Item, *, if_absent: bool = False) -> TxOp:
    op = TxOp("Put", role, item=item)
    if if_absent:
        op.condition = "attribute_not_exists(pk)"
    return op


@dataclass
class Reason:
    code: str
    item: Item | None


class TxCancelled(Exception):
    def __init__(self, ops: list[TxOp], reasons: list[Reason]) -> None:
        super().__init__("transaction cancelled: " + ", ".join(r.code for r in reasons))
        self.ops = ops
        self.reasons = reasons

    def failed(self, role: str) -> Reason | None:
        """The reason an operation of this role failed its condition, if it did."""
        for op, reason in zip(self.ops, self.reasons, strict=False):
            if op.role == role and reason.code == "ConditionalCheckFailed":
                return reason
        return None

    @property
    def conflict(self) -> bool:
        """Another transaction held one of the items: retry as is."""
        return any(r.code in ("TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded")
                   for r in self.reasons)

    def reason_for(self, role: str) -> Reason | None:
        for op, reason in zip(self.ops, self.reasons, strict=False):
            if op.role == role:
                return reason
        return None


class TransientStoreError(Exception):
    """The store asked us to back off (conflict or throttling outside a cancellation)."""


async def transact(clients: AWSClients, ops: list[TxOp]) -> None:
    table = clients.config.table_name
    ddb = await clients.dynamodb()
    try:
        await ddb.transact_write_items(
            TransactItems=[op.to_request(table) for op in ops], ReturnConsumedCapacity="TOTAL"
        )
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code", "")
        if code == "TransactionCanceledException":
            raw = exc.response.get("CancellationReasons") or []
            reasons = [Reason(r.get("Code", "None"), from_ddb(r.get("Item"))) for r in raw]
            if not reasons:
                reasons = _reasons_from_message(error.get("Message", ""), len(ops))
            raise TxCancelled(ops, reasons) from None
        if code in ("TransactionConflictException", "ThrottlingException",
                    "ProvisionedThroughputExceededException", "TransactionInProgressException"):
            raise TransientStoreError(code) from exc
        raise


def _reasons_from_message(message: str, count: int) -> list[Reason]:
    """Some emulators put the reasons only in the message: ``... reasons [None, ConditionalCheckFailed]``."""
    start, end = message.find("["), message.rfind("]")
    codes = [c.strip() for c in message[start + 1 : end].split(",")] if start >= 0 < end else []
    codes = (codes + ["None"] * count)[:count]
    return [Reason(code or "None", None) for code in codes]
