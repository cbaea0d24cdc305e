"""The JSON envelope every SQS message body carries, and where large payloads go instead of the body.

SQS's own message id changes every time a message is sent again (a long delay's hop, a redelivery asked for
with ``redeliver_after``), so the envelope carries this World's id, the first send's time and an attempt offset;
together with ``ApproximateReceiveCount`` they give the contract's stable delivery metadata. A payload whose
body would exceed ``INLINE_BODY_LIMIT`` rides as an S3 reference (SQS caps a body at 256 KiB, and a batch at
256 KiB in total).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from ...world.errors import InvalidInputError
from ...world.ids import check_entity_id, new_ulid
from ...world.queue import check_idempotency_key, named_run, parse_queue_name, payload_json
from ..clients import AWSClients
from ..resources import QUEUE_PREFIX, RUNS_PREFIX, run_prefix
from ..retention import expiry_tagging
from ..values import encode_json

ENVELOPE_VERSION = 1
INLINE_BODY_LIMIT = 200 * 1024
MESSAGE_ID_PREFIX = "msg_"


class MalformedBody(Exception):
    """The body is not an envelope this World wrote. The reason names what is wrong, never the content."""


def new_message_id() -> str:
    return f"{MESSAGE_ID_PREFIX}{new_ulid()}"


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def from_epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


@dataclass(frozen=True)
class Envelope:
    message_id: str
    queue_name: str
    created_at: datetime
    attempt: int = 0
    """Deliveries that happened before this send: a re-send keeps counting from here."""
    due_at: datetime | None = None
    """Set only for a delay longer than one hop: the consumer re-sends until then."""
    idempotency_key: str | None = None
    deployment_id: str | None = None
    payload: Any = None
    payload_ref: dict[str, Any] | None = None
    """{"key": s3 key, "size": bytes} when the payload lives in S3."""

    def to_body(self) -> str:
        body: dict[str, Any] = {"awsworld": ENVELOPE_VERSION, "messageId": self.message_id,
                                "queueName": self.queue_name, "createdAt": iso(self.created_at),
                                "attempt": self.attempt}
        if self.due_at is not None:
            body["dueAt"] = iso(self.due_at)
        if self.idempotency_key is not None:
            body["idempotencyKey"] = self.idempotency_key
        if self.deployment_id is not None:
            body["deploymentId"] = self.deployment_id
        if self.payload_ref is not None:
            body["payloadRef"] = self.payload_ref
        else:
            body["payload"] = self.payload
        return encode_json(body, "payload")

    def resent(self, *, attempt: int | None = None, due_at: datetime | None = None) -> Envelope:
        return replace(self, attempt=self.attempt if attempt is None else attempt, due_at=due_at)


def _time(body: dict[str, Any], name: str, *, required: bool) -> datetime | None:
    raw = body.get(name)
    if raw is None and not required:
        return None
    if not isinstance(raw, str):
        raise MalformedBody(f"{name} is missing or not a string")
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise MalformedBody(f"{name} is not an ISO timestamp") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def decode_body(text: object) -> Envelope:
    """Parse and check a body; ``MalformedBody`` says why it is not one of ours."""
    if not isinstance(text, str) or not text:
        raise MalformedBody("body is empty")
    try:
        body = json.loads(text)
    except ValueError:
        raise MalformedBody("body is not JSON") from None
    if not isinstance(body, dict) or body.get("awsworld") != ENVELOPE_VERSION:
        raise MalformedBody("body is not an awsworld envelope (version 1)")
    message_id = body.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        raise MalformedBody("messageId is missing")
    try:
        parse_queue_name(body.get("queueName"))
        check_idempotency_key(body.get("idempotencyKey"))
    except InvalidInputError as error:
        raise MalformedBody(f"{error.field} is invalid") from None
    attempt = body.get("attempt", 0)
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
        raise MalformedBody("attempt is not a count")
    ref = body.get("payloadRef")
    if ref is not None and not (isinstance(ref, dict) and isinstance(ref.get("key"), str)):
        raise MalformedBody("payloadRef is invalid")
    deployment = body.get("deploymentId")
    created_at = _time(body, "createdAt", required=True)
    assert created_at is not None
    return Envelope(
        message_id=message_id,
        queue_name=body["queueName"],
        created_at=created_at,
        attempt=attempt,
        due_at=_time(body, "dueAt", required=False),
        idempotency_key=body.get("idempotencyKey"),
        deployment_id=deployment if isinstance(deployment, str) else None,
        payload=body.get("payload"),
        payload_ref=ref,
    )


def payload_run(ref: dict[str, Any]) -> str | None:
    """The run whose prefix holds a payload stored in S3 (``runs/<run id>/queue/...``, ``QueuePayloads._key``), or
    None: a payload with no run id is stored under ``queue/``. What an operator's list says of a message whose
    payload it does not fetch (``client/dead_letters.py``)."""
    parts = str(ref.get("key", "")).split("/")
    if len(parts) != 4 or f"{parts[0]}/" != RUNS_PREFIX or f"{parts[2]}/" != QUEUE_PREFIX:
        return None
    try:
        return check_entity_id(parts[1], "runId")
    except InvalidInputError:
        return None


class QueuePayloads:
    """Large payloads as S3 objects: under the run's prefix when the payload names a run (``world.queue.named_run``:
    ``runId``, ``workflowRunId``, or either in a push envelope's message), so per-run lifecycle and retention cover
    it, else under ``queue/`` (the flow function reads those back, the World server writes them: the template's
    ``QueuePayloads`` grants). Objects are immutable and never deleted on
    acknowledgement, because a standard queue may still hand a duplicate of the message to a second consumer;
    the bucket's lifecycle rules expire them."""

    def __init__(self, clients: AWSClients, *, inline_limit: int = INLINE_BODY_LIMIT) -> None:
        self.clients = clients
        self.inline_limit = inline_limit

    def _key(self, envelope: Envelope) -> tuple[str, str | None]:
        """The payload's key, and its tags: a run's expiry class under the run's prefix (aws/retention.py), none
        under ``queue/`` (a rule of its own expires those)."""
        run = named_run(envelope.payload)
        if run is None:
            return f"{QUEUE_PREFIX}{envelope.message_id}.json", None
        tagging = expiry_tagging(self.clients.retention.object_expiry(run))
        return f"{run_prefix(run)}{QUEUE_PREFIX}{envelope.message_id}.json", tagging

    async def fit(self, envelope: Envelope, body: str) -> tuple[Envelope, str]:
        """The envelope as it will be sent and its body: the payload moves to S3 when the body is too big.
        ``body``: ``envelope.to_body()``, or "" when that was longer than the inline limit (not kept: the payload
        is sized on its own text, and refused past ``AWSWORLD_MAX_VALUE_BYTES`` before its bytes are made)."""
        if body and len(body.encode("utf-8")) <= self.inline_limit:
            return envelope, body
        data = payload_json(envelope.payload, self.clients.config.max_value_bytes).encode("utf-8")
        key, tagging = self._key(envelope)
        s3 = await self.clients.s3()
        await s3.put_object(Bucket=self.clients.config.bucket_name, Key=key, Body=data,
                            ContentType="application/json", **({"Tagging": tagging} if tagging else {}))
        moved = replace(envelope, payload=None, payload_ref={"key": key, "size": len(data)})
        return moved, moved.to_body()

    async def load(self, envelope: Envelope) -> Any:
        """The payload; ``MalformedBody`` when the referenced object is gone (it can never be delivered)."""
        if envelope.payload_ref is None:
            return envelope.payload
        s3 = await self.clients.s3()
        try:
            response = await s3.get_object(Bucket=self.clients.config.bucket_name, Key=envelope.payload_ref["key"])
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise MalformedBody("payloadRef names an S3 object that does not exist") from None
            raise
        async with response["Body"] as stream:
            data = await stream.read()
        try:
            return json.loads(data.decode("utf-8"))
        except ValueError:
            raise MalformedBody("payloadRef object is not JSON") from None
