"""Materialized entities: what runs, steps, hooks and waits look like after their events applied."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag

from .errors import InvalidInputError
from .sdk_values import DEVALUE_TAG, UnreadableError, read_sdk_bytes, sdk_error_fields
from .wire_model import WireModel

RunStatus = Literal["pending", "running", "completed", "failed", "cancelled"]
StepStatus = Literal["pending", "running", "completed", "failed", "cancelled"]
WaitStatus = Literal["waiting", "completed"]
ResolveData = Literal["all", "none", "skip-step-inputs"]

RUN_STATUSES: tuple[RunStatus, ...] = ("pending", "running", "completed", "failed", "cancelled")
TERMINAL_RUN_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
TERMINAL_STEP_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


# What a read at each ``resolve_data`` shows, for every World (the contract): errors always; "none" no user value;
# "skip-step-inputs" every value but the inputs of steps (a step's input, step_created's and step_started's).
def values_shown(resolve: ResolveData) -> bool:
    """Whether a read shows user values at all (a run's input and output, a step's output, a hook's metadata)."""
    return resolve != "none"


def step_input_shown(resolve: ResolveData) -> bool:
    return resolve == "all"


def run_end_shown(status: str, resolve: ResolveData) -> Literal["output", "error"] | None:
    """Which value of its terminal event a run shows: a completed run's output (when values are shown), a failed
    run's error (always); None for any other run (a cancelled one shows neither)."""
    if status == "failed":
        return "error"
    return "output" if status == "completed" and values_shown(resolve) else None


def step_lease_shown(status: str) -> bool:
    """A step shows when its lease ends only while it runs (the stored end outlives the attempt, for the next
    start's check)."""
    return status == "running"


def event_value_shown(event_type: str, resolve: ResolveData) -> bool:
    """Whether an event read at ``resolve`` carries its value field."""
    if resolve == "none":
        return False
    return not (resolve == "skip-step-inputs" and event_type in ("step_created", "step_started"))


class StructuredError(WireModel):
    """An error as stored in the log: enough to re-raise it with its type after replay, and to fix it.

    ``name`` is the exception's class name, ``type`` its qualified name (``myapp.errors.Declined``), ``stack`` its
    traceback (bounded: see ``_worker.error_shapes``). A run that failed because a step's ``StepError`` went
    uncaught names the step (``step_name``, ``step_id``, ``attempt``) and keeps the step's own error as
    ``cause``; one that a child run's ``ChildWorkflowError`` failed names the child (``child_run_id``,
    ``child_workflow_name``) and keeps the child's original error as ``cause``. Errors written before these fields
    existed simply lack them."""

    model_config = WireModel.model_config | {"extra": "allow"}
    message: str
    stack: str | None = None
    code: str | None = None
    name: str | None = None
    type: str | None = None
    step_name: str | None = None
    step_id: str | None = None
    attempt: int | None = None
    child_run_id: str | None = None
    child_workflow_name: str | None = None
    cause: StructuredError | None = None


class ErrorBytes(WireModel):
    """An error another runtime serialized itself, kept and returned byte for byte and never read: the Workflow
    SDK's TypeScript runtime sends the ``error`` of run_failed, step_failed and step_retrying as bytes (a 4-byte
    format tag such as ``gzip`` or ``devl``, then its own encoding). On the wire, and in storage, it is the tagged
    object every Workflow SDK World uses for bytes: ``{"__type": "Uint8Array", "data": "<base64>"}``."""

    model_config = WireModel.model_config | ConfigDict(alias_generator=None)
    tag: Literal["Uint8Array"] = Field(alias="__type")
    data: str = Field(pattern=r"^[A-Za-z0-9+/]*={0,2}$")

    def to_bytes(self) -> bytes:
        return base64.b64decode(self.data)

    @classmethod
    def of_error(cls, name: str, message: str) -> ErrorBytes:
        """An ``Error`` named ``name`` as the TypeScript runtime writes one with compression off, the form its
        ``hydrateRunError`` reads back to an ``Error`` of that name and message (``run.returnValue`` throws it as
        the cause of its ``WorkflowRunFailedError``): the ``devl`` tag, then devalue's flat JSON of the runtime's
        ``Error`` reducer, ``[["Error", 1], {"name": 2, "message": 3, "stack": 4}, name, message, stack]``. What
        awsworld writes on a run of that runtime (``Client.fail``): a structured error there is no ``Uint8Array``,
        and the runtime could not read it."""
        flat = [["Error", 1], {"name": 2, "message": 3, "stack": 4}, name, message, f"{name}: {message}"]
        payload = DEVALUE_TAG + json.dumps(flat, separators=(",", ":")).encode()
        return cls.model_validate({"__type": "Uint8Array", "data": base64.b64encode(payload).decode("ascii")})

    def read_error(self) -> tuple[str, str] | None:
        """(name, message) of the error these bytes hold (``read_fields``); None when they are not read."""
        fields = self.read_fields()
        return None if fields is None else (fields["name"], fields["message"])

    def read_fields(self) -> dict[str, Any] | None:
        """The error these bytes hold as awsworld's error fields (``name``, ``message``, ``stack``), read
        from the runtime's forms ``world/sdk_values.py`` reads (``devl``, ``gzip``; an ``Error`` or any of its
        subclasses, ``FatalError`` included, whose reducer names the class rather than writing ``name``): what
        ``describe`` shows of a TypeScript run's failure. None for anything else (encrypted, another format), which
        stays unread."""
        try:
            return sdk_error_fields(read_sdk_bytes(self.to_bytes()))
        except (UnreadableError, RecursionError):
            return None


STRUCTURED_ERROR_TAG = "structured-error"
ERROR_BYTES_TAG = "error-bytes"
ERROR_TAGS = frozenset({STRUCTURED_ERROR_TAG, ERROR_BYTES_TAG})
"""The union's tags, which a validation error's location names (``events._field_path`` leaves them out, so a
bad error is refused naming ``eventData.error.message``)."""


def _error_kind(value: Any) -> str:
    tagged = isinstance(value, ErrorBytes) or (isinstance(value, dict) and "__type" in value)
    return ERROR_BYTES_TAG if tagged else STRUCTURED_ERROR_TAG


StoredError = Annotated[
    Annotated[StructuredError, Tag(STRUCTURED_ERROR_TAG)] | Annotated[ErrorBytes, Tag(ERROR_BYTES_TAG)],
    Discriminator(_error_kind)]
"""What a failed run, step or retry keeps as its error: awsworld's structured error, or another runtime's bytes
(told apart by the bytes' ``__type`` tag)."""


def stored_error(value: Any) -> StructuredError | ErrorBytes | None:
    """A stored error (its JSON) as the model a read shows; None for none."""
    if not value:
        return None
    if isinstance(value, dict) and "__type" in value:
        return ErrorBytes.model_validate(value)
    return StructuredError.model_validate(value)


def error_name_and_message(error: StructuredError | ErrorBytes | None) -> tuple[str | None, str]:
    """(name, message) of a stored error, for a person: another runtime's bytes are read only when they hold a
    plain ``Error`` devalue's text (``ErrorBytes.read_error``), and sized otherwise."""
    if error is None:
        return None, "unknown error"
    if isinstance(error, ErrorBytes):
        read = error.read_error()
        if read is not None:
            return read
        return None, f"an error serialized by another runtime ({len(error.to_bytes())} bytes)"
    return error.name, error.message


class Run(WireModel):
    run_id: str
    status: RunStatus
    workflow_name: str
    deployment_id: str | None = None
    spec_version: int
    execution_context: dict[str, Any] | None = None
    input: Any = None
    output: Any = None
    error: StoredError | None = None
    error_code: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    seq: int = 0
    seq_in_band: int = 0
    open_steps: int = 0
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_RUN_STATUSES


class Step(WireModel):
    run_id: str
    step_id: str
    step_name: str
    status: StepStatus
    input: Any = None
    output: Any = None
    error: StoredError | None = None
    attempt: int = 0
    retry_after: datetime | None = None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    spec_version: int | None = None
    lease_until: datetime | None = None
    """While it runs: when the lease of the delivery running it ends (then another may take it over)."""


HookStatus = Literal["open", "closed"]


class HookRecord(WireModel):
    """A hook as the World records it (what ``Run.wait_for_hook`` and ``HooksAPI.get`` return): a live hook
    (``status="open"``), or one whose token is retained after its run ended (``"closed"``: it takes no more
    payloads; see ``world/rules/hooks.py``). Disposed hooks, and those released at their run's end, are deleted.
    Not ``awsworld.Hook[T]``, the handle a workflow's ``create_hook`` returns and awaits: this was named ``Hook``
    too, and that name stays importable from ``awsworld.world`` (``Hook``, below)."""

    run_id: str
    hook_id: str
    token: str
    status: HookStatus = "open"
    metadata: Any = None
    is_webhook: bool = False
    payload_codec: bool = False
    """Its payloads are a codec's text or bytes (``create_hook(codec=...)``): ``resume_hook`` refuses any other
    payload (``CodecPayloadError``) and ``awsworld resume`` sends its PAYLOAD as that text. False for a hook created
    before the World kept it, and from a World that does not."""
    token_retention_until: datetime | None = None
    created_at: datetime
    updated_at: datetime
    received_at: datetime | None = None
    spec_version: int | None = None
    owner_id: str | None = None
    project_id: str | None = None
    environment: str | None = None
    """Where the hook lives, as the Workflow SDK's hooks say it (``ownerId``, ``projectId``, ``environment``: a team,
    a project and a deployment there): filled in by ``awsworld serve`` (``world/rules/hooks.py``'s
    ``hook_owner``), absent from a World's own reads."""


Hook = HookRecord
"""``HookRecord``'s name before it had its own (kept importable: ``from awsworld.world import Hook``)."""


class Wait(WireModel):
    run_id: str
    wait_id: str
    status: WaitStatus
    resume_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None = None
    spec_version: int | None = None


class Capabilities(WireModel):
    """What this World implements beyond the required contract; every missing member means unsupported."""

    hook_retention: dict[str, bool] | None = None
    max_concurrency: bool = False
    in_band_fence: bool = False
    hook_force_claim: bool = False
    dynamic_workflow_code: bool = False


def run_status_filter(status: str | Sequence[str] | None) -> list[str] | None:
    """A runs listing's ``status`` filter: None (any), or the statuses asked for; an unknown one is a 400.
    ``[]`` stays ``[]`` (it matches nothing, like SQL ``IN ()``)."""
    if status is None:
        return None
    values = [status] if isinstance(status, str) else list(status)
    for s in values:
        if s not in RUN_STATUSES:
            raise InvalidInputError(f"unknown run status {s!r}: a run's status is one of {', '.join(RUN_STATUSES)}",
                                    field="status")
    return values
