"""Running one attempt of a step: claim it (step_started), run the body, record the outcome.

The claim is the liveness check: the World refuses step_started on a finished run, so a queued step never
needs to read the run first. Retries follow the step's ``max_retries``; the attempt count is only enforced once
the step has actually failed before, so concurrent first starts (which each bump the counter) never use up
retries.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from ..world.errors import (
    EntityConflictError,
    PayloadTooLargeError,
    RunGoneError,
    StepNotFoundError,
    StepRunningElsewhereError,
    TooEarlyError,
)
from ..world.events import Event, EventResult
from . import serde
from .context import current_step
from .errors import FatalError, RetryableError, ValueTooLargeError
from .registry import Registry
from .step_context import StepContext, StepMetadata

MAX_ERROR_MESSAGE = 32 * 1024

Status = Literal["completed", "failed", "retry", "gone", "finished-already", "too-early", "running-elsewhere"]


@dataclass
class StepOutcome:
    status: Status
    events: list[Event]
    retry_after: float = 0.0
    attempt: int = 0
    open_steps: int | None = None


def structured_error(error: BaseException) -> dict[str, Any]:
    """An error as the log stores it; the stack is kept (it is code, not user data)."""
    message = str(error) or type(error).__name__
    if len(message) > MAX_ERROR_MESSAGE:  # a message of megabytes would not fit the log: keep its head, say so
        message = f"{message[:MAX_ERROR_MESSAGE]}… ({len(message) - MAX_ERROR_MESSAGE} more characters cut)"
    return {
        "message": message,
        "name": type(error).__name__,
        "stack": "".join(traceback.format_exception(error))[-8000:],
    }


async def run_step(world: Any, registry: Registry, run_id: str, step_id: str, step_name: str, *,
                   in_band: int | None = None, on_in_band: Any = None, owner: str | None = None,
                   claimed: EventResult | None = None, call_input: Any = None) -> StepOutcome:
    """``owner`` is the delivery's message id, recorded on step_started so a redelivery of the same message
    knows the step is its own to run again. ``claimed`` is a step_started already written (a step declared
    born running in the flow's batch)."""
    definition = registry.step(step_name)
    start_kwargs: dict[str, Any] = {}
    if in_band is not None:
        start_kwargs = {"in_band": True, "expected_seq_in_band": in_band}
    started = claimed
    if started is None:
        event: dict[str, Any] = {"eventType": "step_started", "correlationId": step_id}
        if owner:
            event["eventData"] = {"ownerMessageId": owner}
        try:
            started = await world.events.create(run_id, event, **start_kwargs)
        except RunGoneError:
            return StepOutcome("gone", [])
        except StepRunningElsewhereError:
            return StepOutcome("running-elsewhere", [])
        except EntityConflictError:
            return StepOutcome("finished-already", [])
        except TooEarlyError as early:
            return StepOutcome("too-early", [], retry_after=early.retry_after)
        except StepNotFoundError:
            return StepOutcome("gone", [])
    if on_in_band is not None and started.seq_in_band is not None:
        on_in_band(started.seq_in_band)
    step = started.step
    assert step is not None and started.event is not None
    events = [] if claimed is not None else [*started.events, started.event]
    raw_input = call_input if call_input is not None else step.input
    call = serde.loads(raw_input) if raw_input is not None else {"args": [], "kwargs": {}}
    metadata = StepMetadata(run_id, step_id, step_name, step.attempt, step.started_at)
    context = StepContext(world, metadata)
    token = current_step.set(context)
    try:  # context.run: the chunks the body wrote to streams are durable before its outcome is recorded
        result = await context.run(definition.fn(*call.get("args", []), **call.get("kwargs", {})))
        try:
            encoded = serde.dumps(result)
        except serde.SerializationError as error:
            raise FatalError(f"the result of step {step_name} cannot be serialized: {error}") from None
    except FatalError as error:
        return await _finish(world, run_id, step_id, "step_failed", {"error": structured_error(error)}, events,
                             step.attempt)
    except Exception as error:  # a step body may raise anything: retried per its policy
        failed_before = step.error is not None
        if failed_before and step.attempt > definition.max_retries:
            return await _finish(world, run_id, step_id, "step_failed", {"error": structured_error(error)}, events,
                                 step.attempt)
        delay = definition.retry_delay
        if isinstance(error, RetryableError) and error.retry_after is not None:
            delay = error.retry_after
        if not failed_before and definition.max_retries == 0:
            return await _finish(world, run_id, step_id, "step_failed", {"error": structured_error(error)}, events,
                                 step.attempt)
        retry_at = datetime.now(UTC) + timedelta(seconds=delay)
        outcome = await _finish(world, run_id, step_id, "step_retrying",
                                {"error": structured_error(error), "retryAfter": retry_at.isoformat()}, events,
                                step.attempt)
        outcome.retry_after = delay
        return outcome
    finally:
        current_step.reset(token)
    return await _finish(world, run_id, step_id, "step_completed", {"result": encoded}, events, step.attempt)


async def _finish(world: Any, run_id: str, step_id: str, kind: str, data: dict[str, Any], events: list[Event],
                  attempt: int) -> StepOutcome:
    status: Status = {"step_completed": "completed", "step_failed": "failed", "step_retrying": "retry"}[kind]  # type: ignore[assignment]
    try:
        result = await world.events.create(run_id, {"eventType": kind, "correlationId": step_id, "eventData": data},
                                           after_step_body=True)
    except EntityConflictError:
        return StepOutcome("finished-already", events, attempt=attempt)
    except PayloadTooLargeError as too_large:
        if kind == "step_failed":
            raise  # even the error does not fit (structured_error caps it, so this does not happen)
        # Running the body again would produce the same value: fail the step for good, with an error the
        # workflow can catch (StepError with error_type "ValueTooLargeError"), instead of a re-run loop.
        error = ValueTooLargeError(f"the {'result' if kind == 'step_completed' else 'error'} of step "
                                   f"{step_id} is too large to record: {too_large.message}")
        return await _finish(world, run_id, step_id, "step_failed", {"error": structured_error(error)}, events,
                             attempt)
    assert result.event is not None
    return StepOutcome(status, [*events, result.event], attempt=attempt, open_steps=result.open_steps)
