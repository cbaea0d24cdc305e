"""The Queue part of the contract: queue names, batch entries and results, deliveries, and the protocol.

A queue name is a prefix (``__wkf_workflow_`` or ``__<namespace>_wkf_workflow_``) followed by an id, and it
travels unchanged from ``queue()`` to the delivery, so a consumer can refuse a message of another prefix
(it is retried, never run by the wrong consumer). Nothing here does I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, cast, runtime_checkable

from pydantic import AliasChoices, Field, ValidationError
from pydantic.alias_generators import to_camel

from ..settings import SETTINGS, Settings
from .errors import InvalidInputError, PayloadTooLargeError
from .ids import check_entity_id
from .limits import json_size_over, text_size_over, value_json
from .wire_model import WireModel

# The spec's patterns: a namespace is lowercase alphanumeric starting with a letter.
QUEUE_PREFIX_RE = re.compile(r"^__(?:[a-z][a-z0-9]*_)?wkf_workflow_$")
_QUEUE_NAME_RE = re.compile(r"^(__(?:[a-z][a-z0-9]*_)?wkf_workflow_)(\S+)$")
DEFAULT_QUEUE_PREFIX = "__wkf_workflow_"
MAX_QUEUE_NAME_LENGTH = 512
MAX_IDEMPOTENCY_KEY_LENGTH = 512
DEFAULT_DEPLOYMENT_ID = "local"
"""``get_deployment_id`` of a World configured with no deployment id (a laptop, a test)."""
_GOOD_NAMES: set[str] = set()
"""Queue names ``check_queue_name`` accepted: a World sends to a handful of names, and checking one costs more
than the rest of an in-memory send."""

# The stack's one queue, as every World keeps it: the AWS World creates it so (``aws/resources.py``, the SAM
# template) and the in-memory queue behaves so (``_memory/queue.py``). How consumers use it:
# ``shared/queue_consumer.py``; an idempotency key's marker: ``queue_keys.py``.
# The flow function's timeout is the template's FlowTimeoutSeconds, passed to the code as
# ``AWSWORLD_FLOW_TIMEOUT_SECONDS``; the queue's visibility timeout follows it (the template's FlowTimeouts mapping).
FLOW_FUNCTION_TIMEOUT_SECONDS = Settings.flow_timeout_seconds.default
VISIBILITY_TIMEOUTS_PER_FLOW_TIMEOUT = 6
"""The queue's visibility timeout is this many times the flow function's timeout, so a delivery still running is
not handed to a second consumer (AWS recommends 6x for event source mappings)."""
QUEUE_VISIBILITY_TIMEOUT_SECONDS = VISIBILITY_TIMEOUTS_PER_FLOW_TIMEOUT * FLOW_FUNCTION_TIMEOUT_SECONDS
"""The visibility timeout of a stack deployed with the default flow timeout (120 s): 720 s."""
QUEUE_MAX_RECEIVE_COUNT = 10
"""The redrive policy: a message received this often since it was last sent goes to the dead-letter queue."""
QUEUE_RETENTION_SECONDS = 4 * 24 * 3600
MAX_VISIBILITY_SECONDS = 43_200


def flow_function_timeout_seconds() -> int:
    """The deployed flow function's timeout (``AWSWORLD_FLOW_TIMEOUT_SECONDS``, the template's
    ``FlowTimeoutSeconds``): one invocation, and every step attempt it runs, is killed after it."""
    return SETTINGS.flow_timeout_seconds


def queue_visibility_timeout_seconds() -> int:
    """The queue's visibility timeout for the deployed flow timeout: how long a received message stays hidden,
    and so how much later a message whose delivery was lost comes back (the template's FlowTimeouts mapping)."""
    return VISIBILITY_TIMEOUTS_PER_FLOW_TIMEOUT * flow_function_timeout_seconds()


def visibility_seconds(seconds: float) -> float:
    """How long a received message is hidden when a consumer asks for ``seconds``: SQS's range, 0 to 12 hours."""
    return max(0.0, min(float(MAX_VISIBILITY_SECONDS), seconds))


def key_horizon_seconds(retention_seconds: float, visibility_seconds: float) -> float:
    """How long past its message's due time an idempotency key stays held (unless an ack frees it first): as
    long as that message can still be delivered, its retention plus one visibility timeout in flight."""
    return retention_seconds + visibility_seconds


def parse_queue_name(queue_name: object) -> tuple[str, str]:
    """Split a valid queue name into (prefix, id); a bad name is a 400 naming the field."""
    if not isinstance(queue_name, str) or len(queue_name) > MAX_QUEUE_NAME_LENGTH:
        raise InvalidInputError(f"queue name must be a string of at most {MAX_QUEUE_NAME_LENGTH} characters",
                                field="queueName")
    match = _QUEUE_NAME_RE.match(queue_name)
    if not match or any(ord(c) < 32 or ord(c) == 127 for c in queue_name):
        raise InvalidInputError(
            f"queue name {queue_name!r:.120} must be __wkf_workflow_<id> or __<namespace>_wkf_workflow_<id> "
            "(namespace: lowercase letters and digits, starting with a letter; id: no whitespace)",
            field="queueName",
        )
    return match.group(1), match.group(2)


def check_queue_name(queue_name: object) -> str:
    """``queue_name`` if it is valid (``parse_queue_name``'s 400 if not), remembered once accepted."""
    if isinstance(queue_name, str) and queue_name in _GOOD_NAMES:
        return queue_name
    parse_queue_name(queue_name)
    assert isinstance(queue_name, str)
    if len(_GOOD_NAMES) > 10_000:
        _GOOD_NAMES.clear()
    _GOOD_NAMES.add(queue_name)
    return queue_name


def check_queue_prefix(prefix: object) -> str:
    if not isinstance(prefix, str) or not QUEUE_PREFIX_RE.match(prefix):
        raise InvalidInputError(f"queue prefix {prefix!r:.80} must be __wkf_workflow_ or "
                                "__<namespace>_wkf_workflow_", field="queueNamePrefix")
    return prefix


def queue_prefix_for(namespace: str | None = None) -> str:
    """``__wkf_workflow_``, or ``__<namespace>_wkf_workflow_`` for a namespaced library's own messages."""
    return check_queue_prefix(DEFAULT_QUEUE_PREFIX if namespace is None else f"__{namespace}_wkf_workflow_")


def check_delay(delay: object, field: str = "delaySeconds") -> float:
    """A delay in seconds: a finite number >= 0 (None is 0)."""
    if delay is None:
        return 0.0
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not math.isfinite(delay) or delay < 0:
        raise InvalidInputError(f"{field} must be a finite number of seconds >= 0", field=field)
    return float(delay)


def check_idempotency_key(key: object) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY_LENGTH:
        raise InvalidInputError(f"idempotency key must be a string of 1-{MAX_IDEMPOTENCY_KEY_LENGTH} characters",
                                field="idempotencyKey")
    return key


def payload_json(payload: Any, max_bytes: int) -> str:
    """A queue payload as its JSON text, the same on every World: a 400 when it is not JSON, and
    ``PayloadTooLargeError`` past ``max_bytes`` of UTF-8 (``AWSWORLD_MAX_VALUE_BYTES``: a large one rides in S3)."""
    check_payload_size(payload, max_bytes)
    text = value_json(payload, "payload")
    if (size := text_size_over(text, max_bytes, "surrogatepass")) is not None:
        del text  # (a traceback keeps this frame: ``limits.encode_value``)
        raise _payload_too_large(size, max_bytes)
    return text


PUSH_FIELD = "$push"
"""The payload key that makes a queue message a push envelope (``_http/push.py``: the message, for an app of the
Workflow SDK's TypeScript runtime, under ``message``; an awsworld flow message has ``runId`` and ``workflowName``
instead)."""
RUN_ID_FIELDS = ("runId", "workflowRunId")
"""The fields a queue message names its run by: ``runId`` on awsworld's flow messages (``world/messages.py``) and the
Workflow SDK's workflow messages, ``workflowRunId`` on the SDK's step messages (``@workflow/world``'s
``StepInvokePayloadSchema``)."""


def named_run(payload: Any) -> str | None:
    """The run a queue payload belongs to, or None: its first ``RUN_ID_FIELDS`` field, a push envelope's own
    message's (``PUSH_FIELD``), when that is a valid run id. Why it matters: the AWS World stores a payload over the
    inline limit under its run's prefix, where the run's retention expires it, and under ``queue/`` only when it
    names no run (``aws/queue/queue_envelope.py``)."""
    fields = _fields(payload)
    if isinstance(fields.get(PUSH_FIELD), dict):
        fields = _fields(fields.get("message"))
    run_id = next((value for name in RUN_ID_FIELDS if (value := fields.get(name)) is not None), None)
    try:
        return check_entity_id(run_id, "runId") if isinstance(run_id, str) else None
    except InvalidInputError:
        return None


def _fields(value: object) -> dict[str, object]:
    """A JSON object's fields (a payload is JSON: its keys are strings), or none for any other value."""
    return cast("dict[str, object]", value) if isinstance(value, dict) else {}


def check_payload_size(payload: Any, max_bytes: int) -> None:
    """Refuse a queue payload over ``max_bytes`` before its JSON is made (``limits.json_size_over``: measured a
    part at a time when it may be over), at the cost of the payload and a part. A World that makes the
    message's JSON first (the AWS World's envelope) checks this before it."""
    if (size := json_size_over(payload, max_bytes)) is not None:
        raise _payload_too_large(size, max_bytes)


def _payload_too_large(size: int, max_bytes: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"queue payload is {size} bytes; the largest is {max_bytes}", field="payload")


class QueueMessage(WireModel):
    """One entry of ``queue_batch``: the payload and the options ``queue`` takes as keywords.

    Accepts snake_case or the spec's camelCase, and ``message`` as another name for ``payload``.
    """

    payload: Any = Field(default=None, validation_alias=AliasChoices("payload", "message"))
    idempotency_key: str | None = Field(default=None, strict=True)
    delay_seconds: float | None = Field(default=None, strict=True)
    deployment_id: str | None = Field(default=None, strict=True)

    @classmethod
    def of_call(cls, payload: Any, idempotency_key: str | None, delay_seconds: float | None,
                deployment_id: str | None) -> QueueMessage:
        """The message ``queue()``'s arguments describe, checked as a batch entry is."""
        return cls.parse({"payload": payload, "idempotency_key": idempotency_key, "delay_seconds": delay_seconds,
                          "deployment_id": deployment_id})

    def checked(self) -> tuple[float, str | None]:
        """Its delay and key, checked in the contract's order (delay, then key; each World encodes and checks the
        payload after them)."""
        return check_delay(self.delay_seconds), check_idempotency_key(self.idempotency_key)

    @classmethod
    def parse(cls, raw: object) -> QueueMessage:
        """A message from a model or a mapping; a bad one is a 400 naming the field (camelCase, as on the wire)."""
        if isinstance(raw, QueueMessage):
            return raw
        if not isinstance(raw, Mapping):
            raise InvalidInputError("a queue message must be a mapping with a payload", field="message")
        try:
            return cls.model_validate(raw)
        except ValidationError as error:
            first = error.errors()[0]
            name = str(first.get("loc", ("message",))[0])
            field = to_camel(name) if "_" in name else name
            raise InvalidInputError(f"invalid {field}: {first.get('msg', 'invalid value')}", field=field) from None


class QueueBatchResult(WireModel):
    """One result per input message, in input order. ``error`` set means rejected; ``retryable`` says whether
    publishing it again might succeed. A success always carries the message id here (this World knows it)."""

    message_id: str | None = None
    error: str | None = None
    retryable: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Delivery:
    """A message handed to a consumer, with the metadata the contract's handler receives.

    ``message_id`` is this World's own id, stable across redeliveries and re-sends (SQS's id is not: it
    changes whenever the message is sent again). ``attempt`` and ``delivery_count`` are 1 on the first
    delivery and grow on every redelivery, including ones asked for with ``redeliver_after``.
    ``receipt_handle`` is the transport's token for acknowledging this particular delivery.
    """

    message_id: str
    queue_name: str
    payload: Any
    attempt: int
    delivery_count: int
    created_at: datetime
    receipt_handle: str
    transport_message_id: str
    idempotency_key: str | None = None
    deployment_id: str | None = None
    transport: Any = field(default=None, repr=False, compare=False)
    """The transport's own state for this delivery (what a redelivery re-sends); opaque to callers."""

    def meta(self) -> dict[str, Any]:
        """The handler's ``meta`` argument, shaped like the spec's."""
        return {"attempt": self.attempt, "deliveryCount": self.delivery_count, "createdAt": self.created_at,
                "queueName": self.queue_name, "messageId": self.message_id}


@dataclass(frozen=True)
class Refused:
    """A message of another queue prefix: the caller reports it failed (or releases it) so it is retried by the
    consumer it belongs to, never run here."""

    message_id: str
    queue_name: str
    transport_message_id: str
    receipt_handle: str
    transport: Any = field(default=None, repr=False, compare=False)
    """The transport's own state for this receive (what ``release`` makes visible again); opaque to callers."""

    kind = "refused"

    @property
    def failure(self) -> str:
        return f"message for queue {self.queue_name} is not under this consumer's prefix"


@runtime_checkable
class QueueAPI(Protocol):
    """What the runtime calls to publish. Consuming is the transport's business (see ``awsworld.aws``)."""

    async def get_deployment_id(self) -> str: ...

    async def queue(
        self,
        queue_name: str,
        payload: Any,
        *,
        idempotency_key: str | None = None,
        delay_seconds: float | None = None,
        deployment_id: str | None = None,
    ) -> str: ...

    async def queue_batch(
        self, queue_name: str, messages: Sequence[QueueMessage | Mapping[str, Any]]
    ) -> list[QueueBatchResult]: ...
