"""Typed errors of the World contract.

Every error carries an HTTP-like ``status`` so transports (the webhook handler, a future HTTP World) can map
them without a lookup table, and a stable ``code`` for logs and metrics.
"""

from __future__ import annotations

from typing import Any

from .wire_model import WireModel


class WorldError(Exception):
    status: int = 500
    code: str = "world-error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status})"


class InvalidInputError(WorldError):
    """Bad input: names the offending field. Nothing was written."""

    status = 400
    code = "invalid-input"

    def __init__(self, message: str, *, field: str | None = None, **details: Any) -> None:
        super().__init__(message, field=field, **details)
        self.field = field


class RunNotSupportedError(InvalidInputError):
    """A write stamped with a spec version above the one this World implements: it would follow rules this World
    has not learned, so it is refused before anything is written (``world/rules/requests.py``)."""

    code = "run-not-supported"

    def __init__(self, message: str, *, run_spec_version: int, world_spec_version: int) -> None:
        super().__init__(message, field="specVersion", run_spec_version=run_spec_version,
                         world_spec_version=world_spec_version)
        self.run_spec_version = run_spec_version
        self.world_spec_version = world_spec_version


class MissingInBandCountError(InvalidInputError):
    """An in-band write without ``expected_seq_in_band``."""

    code = "missing-in-band-count"

    def __init__(self, message: str = "in-band write needs expected_seq_in_band") -> None:
        super().__init__(message, field="expectedSeqInBand")


class NotFoundError(WorldError):
    status = 404
    code = "not-found"


class RunNotFoundError(NotFoundError):
    code = "run-not-found"


class StreamNotFoundError(NotFoundError):
    """A read of a stream no step of the run wrote, once the run has ended (so none ever will): a mistyped name
    read as an empty stream before. ``names``: the run's streams, which the message lists."""

    code = "stream-not-found"

    def __init__(self, message: str, *, run_id: str, stream: str, names: list[str]) -> None:
        super().__init__(message, run_id=run_id, stream=stream, names=names)
        self.run_id = run_id
        self.stream = stream
        self.names = names


class StepNotFoundError(NotFoundError):
    code = "step-not-found"


class HookNotFoundError(NotFoundError):
    """No hook answers. ``disposed_hook``: for a lookup by token, the (run id, hook id) of the hook that last
    held the token and is gone (disposed, or released by its run's end: ``world/rules/hooks.py``), so a repeat of
    a resume that hook took can still be answered as the first was."""

    code = "hook-not-found"

    def __init__(self, message: str, *, disposed_hook: tuple[str, str] | None = None, **details: Any) -> None:
        super().__init__(message, **details)
        self.disposed_hook = disposed_hook


class EventNotFoundError(NotFoundError):
    """An event or a wait that does not exist."""

    code = "event-not-found"


class EntityConflictError(WorldError):
    """The entity exists already, or is in a state that forbids this transition."""

    status = 409
    code = "entity-conflict"


class RunIdTakenError(EntityConflictError):
    """A start with a run id of your choosing (``client.options(run_id=...)``, ``awsworld start --run-id``,
    ``client.rerun(new_run_id=...)``) found that id held by a run of another workflow: nothing was written and
    nothing was started. Exported as ``awsworld.RunIdTakenError`` (an ``EntityConflictError``, so a
    ``WorldError``). A start with an id that exists returns that run, whatever its arguments; returning a run
    of another workflow instead would tell the caller its workflow started when it never will, and hand it a
    handle whose ``result()`` is the other workflow's value (``_worker/run_control.py``)."""

    code = "run-id-taken"

    def __init__(self, message: str, *, run_id: str, workflow_name: str, requested: str) -> None:
        super().__init__(message, run_id=run_id, workflow_name=workflow_name, requested=requested)
        self.run_id = run_id
        self.workflow_name = workflow_name
        """The workflow the run holding the id runs."""
        self.requested = requested
        """The workflow the refused start named."""


class StreamClosedError(EntityConflictError):
    """An append to a closed stream (its writer's ``close()``, or another writer's, ended it). A stream never reopens,
    so a step that meets this is not retried (``authoring/retry.py``): every attempt would meet it again."""


class StepRunningElsewhereError(EntityConflictError):
    """step_started from a delivery while the step runs under another delivery's message id: the caller is a
    duplicate message and should simply stop (the running delivery records the outcome)."""


class StepAttemptInterruptedError(EntityConflictError):
    """step_started with ``atMostOnce`` while the step's current attempt is unfinished (``rules.at_most_once``):
    nothing was written. ``attempt`` is the interrupted attempt; the caller records its end
    (``StepInterruptedError``)."""

    code = "step-attempt-interrupted"

    def __init__(self, message: str, *, attempt: int) -> None:
        super().__init__(message, attempt=attempt)
        self.attempt = attempt


class HookAlreadyReceivedError(EntityConflictError):
    """A ``hook_received`` with this ``resumeId`` was already recorded for this hook; nothing was written.

    The point of a resume id is that a sender's retry is harmless, so the caller usually treats this as
    success: ``event`` is the event the first request recorded (when the World could read it back), so the
    caller can still wake the run, whose first wake may have been lost. It is a ``world.events.Event``, typed as
    the contract's model base here: the events module imports this one (its requests are refused with these
    errors), so this one names no event model, and the contract's modules import one way.
    """

    code = "hook-already-received"

    def __init__(self, message: str, *, hook_id: str, event_id: str | None = None,
                 event: WireModel | None = None) -> None:
        super().__init__(message, hook_id=hook_id, event_id=event_id)
        self.hook_id = hook_id
        self.event_id = event_id
        self.event = event


class HookResumedElsewhereError(HookAlreadyReceivedError):
    """A ``hook_received`` whose ``resumeId`` is one hook's only (``resumeOnce``) was refused: another hook
    (``hook_id`` of run ``run_id``) recorded that resume id already, so this one records nothing. A workflow's
    ``resume_hook`` retried after the hook its earlier attempt resumed was disposed and the token claimed again
    meets it (``_worker/resume_calls.py``): the payload reached the first hook, and no other gets it."""

    code = "hook-resumed-elsewhere"

    def __init__(self, message: str, *, hook_id: str, run_id: str, event_id: str | None = None,
                 event: WireModel | None = None) -> None:
        super().__init__(message, hook_id=hook_id, event_id=event_id, event=event)
        self.details["run_id"] = run_id
        self.run_id = run_id


class RunGoneError(WorldError):
    """The run is terminal (or the hook's run ended): the write can never succeed."""

    status = 410
    code = "run-gone"


class HookClosedError(HookNotFoundError, RunGoneError):
    """The hook holding the token was closed when its run ended (``run_id``, and ``run_status``: how it ended):
    it takes no more payloads. A ``HookNotFoundError`` (no live hook owns the token, as the contract says) and a
    ``RunGoneError`` (the run is over), so callers catching either keep working; 410, ``hook-closed``."""

    status = 410
    code = "hook-closed"

    def __init__(self, message: str, *, run_id: str, run_status: str, **details: Any) -> None:
        super().__init__(message, run_id=run_id, run_status=run_status, **details)
        self.run_id = run_id
        self.run_status = run_status


class RunValuesUnreadableError(WorldError):
    """A World could not read a run's stored values (or seal new ones): ``lost`` when no retry changes that until
    someone acts (the AWS World's ``EncryptionKeyError``, ``aws/encryption/run_keys.py``: KMS refuses the run's key
    for good). The worker reads it here, below every World: the flow of an ended run whose values are lost reads
    its log without them and still does its end's work (``_worker/inline_loop.py``'s ``Flow._run``)."""

    def __init__(self, message: str, *, lost: bool = False) -> None:
        super().__init__(message)
        self.lost = lost


class InBandSupersededError(WorldError):
    """Another orchestrator wrote to the run first; carries the counters read together at refusal."""

    status = 412
    code = "in-band-superseded"

    def __init__(self, message: str, *, seq: int, seq_in_band: int) -> None:
        super().__init__(message, seq=seq, seq_in_band=seq_in_band)
        self.seq = seq
        self.seq_in_band = seq_in_band


class LogMovedError(WorldError):
    """A batch given ``expect_seq`` found more events in the log than that: it was not written (awsworld's
    extension, for a writer that has shown the workflow an outcome at exactly that position)."""

    status = 409
    code = "log-moved"

    def __init__(self, message: str, *, seq: int) -> None:
        super().__init__(message, seq=seq)
        self.seq = seq


class PayloadTooLargeError(InvalidInputError):
    status = 413
    code = "payload-too-large"


class CodecPayloadError(InvalidInputError):
    """A payload for a hook that decodes its payloads with a codec (``create_hook(codec=...)``: ``Hook.payload_codec``)
    that is not the codec's text or bytes. Refused by ``resume_hook`` (``_worker/run_control.py``) before anything is
    recorded: recorded, the codec would refuse it at the workflow's await (a ``CodecError`` that fails the run)."""

    code = "codec-payload"


class SdkRunError(InvalidInputError):
    """A request from awsworld's side that only the app of a run of the Workflow SDK's TypeScript runtime can make
    (``_http.push.sdk_run``): that runtime's values are its own serialized bytes and only its app runs its code and
    is woken through its queue. Refused before anything is written: ``Client.rerun`` of such a run started a run
    with no app behind it, which awsworld's delivery then parked or failed (``UNKNOWN_WORKFLOW``); ``Client.wake``
    and ``Client.skip_wait`` sent a message the delivery acknowledged unread, and the run slept on
    (``_http.push.refuse_wake``)."""

    code = "sdk-run"


class SdkRunHookError(SdkRunError):
    """A resume, failure or heartbeat sent from awsworld's side (``Client.resume_hook``, ``awsworld resume``, the
    webhook route, ``POST /v1/client/hooks/resume``) to a hook whose run is the Workflow SDK's TypeScript runtime's
    (``_http.push.sdk_run``). Refused by ``resume_hook`` (``_worker/run_control.py``) before anything is recorded:
    that runtime reads a payload as its own serialized bytes and is woken only by its app's queue, so awsworld's
    JSON payload was recorded, reported delivered, never woke the run, and failed it at its next replay (``Error:
    Invalid input``, the runtime's devalue refusing the JSON)."""

    code = "sdk-run-hook"


class TooEarlyError(WorldError):
    status = 425
    code = "too-early"

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message, retry_after=retry_after)
        self.retry_after = retry_after


class ThrottledError(WorldError):
    """The store throttled us past our retry budget; the caller should back off and retry."""

    status = 429
    code = "throttled"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message, retry_after=retry_after)
        self.retry_after = retry_after


class WorldUnreachableError(ConnectionError):
    """The World's store could not be reached at all: nothing answered at its address (``awsworld dev`` stopped or
    never started, ``AWS_ENDPOINT_URL`` naming another port, no network). Raised by every call of a ``Client`` (and
    of anything else over the World) in place of the SDK's own connection error, which stays its ``__cause__``;
    a ``ConnectionError``, so ``except ConnectionError`` (a web app's "service unavailable") holds it.

    Not a ``WorldError``: a ``WorldError`` is the World's answer (refused, not found), and here there was none.
    The SDK retries a request before giving up, and an earlier attempt may have reached the store before the
    connection went, so a write's outcome is unknown: retry a start with its run id
    (``client.options(run_id=...)``), which returns the run if it was made. ``hint``: what to check;
    ``endpoint``: the address tried; ``service`` and ``operation``: the request (``DynamoDB``, ``Query``)."""

    def __init__(self, message: str, *, hint: str, endpoint: str | None, service: str, operation: str) -> None:
        super().__init__(f"{message}: {hint}")
        self.message = message
        self.hint = hint
        self.endpoint = endpoint
        self.service = service
        self.operation = operation

    def __str__(self) -> str:  # (OSError's own would prefix an errno that is not there)
        return f"{self.message}: {self.hint}"


class WorldSetupError(RuntimeError):
    """The World's configuration cannot work, whatever is retried: no credentials, no region, or a table, bucket
    or queue that does not exist where the configuration points (``AWSWORLD_TABLE`` of a stack that was deleted,
    of an ``awsworld dev`` restarted without ``--state``, or in another region). A ``RuntimeError``, as
    ``AWSConfig.from_env``'s refusal of a missing ``AWSWORLD_TABLE`` is; the SDK's error, when there is one, is its
    ``__cause__``. Nothing was written by the request it names. ``hint``: what to set; ``service`` and
    ``operation``: the request (``DynamoDB``, ``Query``)."""

    def __init__(self, message: str, *, hint: str, service: str, operation: str) -> None:
        super().__init__(f"{message}: {hint}")
        self.message = message
        self.hint = hint
        self.service = service
        self.operation = operation
