"""What a flow writes when its workflow suspends, before it runs or queues anything: new steps and waits (in
batches of ``BATCH``, the first step born running when this delivery will run it inline; with a provisional
outcome, in the same write), hooks, the ends of steps the workflow cancelled, hook disposals and waits that are
due. Kept apart from the loop because it is the part that decides how many writes a suspension costs.
"""

from __future__ import annotations

import logging
from datetime import UTC
from typing import Any, Literal

from .._engine.execution import WorkflowExecution, too_large
from .._engine.ops import HookOp, Op, StepOp, WaitOp, named
from .._engine.time_scale import TimeScale
from ..authoring.definitions import Registry, StepDef
from ..authoring.errors import (
    CodecError,
    step_cancelled_error,
)
from ..settings import SETTINGS
from ..world.clock import clock_of
from ..world.errors import EntityConflictError, PayloadTooLargeError, RunGoneError
from ..world.events import BatchEventOutcome
from ..world.rules.limiters import LimitInputError
from . import step_limits
from .child_runs import resolve_step
from .flow_messages import FlowMessages
from .flow_state import BATCH, FlowLog, StepClaims
from .provisional import ProvisionalOutcomes, written
from .step_runner import start_event, step_lease

log = logging.getLogger("awsworld.flow")

Admission = Literal["taken", "waiting", "unkeyed"]
"""What a limited step to be born running got from its limit (``Declarer._take``)."""


class Declarer:
    """Writes what the workflow declared, into ``log``: its steps (claiming the first born running when it will run
    here, ``claims``), waits and hooks, with a held outcome in the same write (``provisional``)."""

    def __init__(self, log: FlowLog, claims: StepClaims, provisional: ProvisionalOutcomes, registry: Registry,
                 deadline: float, messages: FlowMessages) -> None:
        self.log = log
        self.claims = claims
        self.provisional = provisional
        self.registry = registry
        self.deadline = deadline
        self.messages = messages

    async def declare(self, execution: WorkflowExecution) -> bool:
        """Whether anything was new (and is written now)."""
        new = execution.new_ops()
        if not new:
            return False
        batchable = [op for op in new if isinstance(op, StepOp | WaitOp)]
        # The first new step is declared born running (step_created + step_started in the same write) when
        # this flow will run it inline: one write instead of two.
        born = next((op for op in batchable if isinstance(op, StepOp)), None)
        if born is not None and (self.claims.has_inline_work(execution) or self.claims.beside_wakes(execution, born)):
            born = None
        waits_for_limit: tuple[StepOp, StepDef, str] | None = None  # (the step, its definition, its key)
        if born is not None and born.poll is None:
            definition = resolve_step(self.registry, born.definition.name)
            admitted, key = await self._take(born, definition) if definition.limit is not None else ("taken", "")
            if admitted == "waiting":
                waits_for_limit = born, definition, key  # declared below; its limit's message brings it
            if admitted != "taken":
                born = None
        try:
            if not await self._write(execution, new, batchable, born):
                return True  # the outcome was recorded the old way: replay from the log
        except RunGoneError:
            # The run ended before its steps were declared: the waiter its limit wrote for the step above is in no
            # log the end's tidy reads (``step_limits.free_run_steps``). (A slot taken for a start born running is
            # given back by the flow that finds its run gone: ``inline_loop``.)
            if waits_for_limit is not None:
                step, definition, key = waits_for_limit
                await step_limits.withdraw_waiter(self.log.world, definition, self.log.run_id, step.id, key)
            raise
        if waits_for_limit is not None:
            self._waits_for_limit(waits_for_limit[0])
        return True

    async def _write(self, execution: WorkflowExecution, new: list[Op], batchable: list[StepOp | WaitOp],
                     born: StepOp | None) -> bool:
        """The declarations: False when a provisional outcome's write failed and it was recorded the old way."""
        if self.provisional.pending is not None:
            # The step's outcome and the first declarations the workflow made after seeing it: one write.
            first = batchable[:BATCH - 1]
            if not await self._with_end(execution, first, born):
                return False
            batchable = batchable[len(first):]
        for start in range(0, len(batchable), BATCH):
            chunk = batchable[start:start + BATCH]
            try:
                await self._chunk(execution, chunk, born)
            except PayloadTooLargeError:
                # A value in the chunk is over the limit and the World refuses the whole batch: declare them one
                # by one, so only that call fails (a rare path: its extra writes do not matter).
                for op in chunk:
                    try:
                        await self._chunk(execution, [op], born)
                    except PayloadTooLargeError as refusal:
                        execution.refuse(op, too_large(op, "input", refusal.message))
        for op in new:
            if isinstance(op, HookOp):
                try:
                    await self.log.write({"eventType": "hook_created", "correlationId": op.id,
                                       "eventData": named(op, {"token": op.token, "metadata": op.metadata,
                                                               "isWebhook": op.is_webhook})})
                except PayloadTooLargeError as refusal:
                    execution.refuse(op, too_large(op, "metadata", refusal.message))
        return True

    async def _take(self, born: StepOp, definition: StepDef) -> tuple[Admission, str]:
        """A limited step to be born running takes its slot and token first (``step_limits``), so its start
        costs no write of its own: ``taken`` when it did; ``waiting`` when its limit makes it wait (its message,
        sent or to be sent by the limit, brings it); ``unkeyed`` when its key cannot be computed (its attempt
        fails on that, inline). (Asked of a limited step's first attempt only: a step without a limit, or a
        poll, takes nothing.)"""
        try:
            key = step_limits.key_of_call(definition, born.input, self.log.run_id, born.id)
        except (LimitInputError, CodecError):
            return "unkeyed", ""
        taken = await step_limits.take(self.log.world, definition, self.log.run_id, born.id, key,
                                       wake=self.messages.step_message(born),
                                       lease_seconds=step_lease(definition, self.deadline), queued=False)
        if not isinstance(taken, step_limits.Taken):
            return "waiting", key
        self.claims.taken[born.id] = taken
        return "taken", key

    def _waits_for_limit(self, step: StepOp) -> None:
        """A step its limit made wait, now declared: neither run here nor queued by this delivery. Its limit
        holds its message (a waiter's wake, or a message delayed to the start its bucket reserved); running it
        inline would ask its limit again, and a second ask of a rate reserves a second start, which halved a
        rate's throughput (two tokens a step: 6 runs of one step at ``1/m`` took 9 minutes, not 5)."""
        self.claims.owned.discard(step.id)
        self.messages.queued.add(f"{step.id}:{step.attempt}")

    def _declarations(self, chunk: list[StepOp | WaitOp], born: StepOp | None) -> list[dict[str, Any]]:
        requests: list[dict[str, Any]] = []
        factor = SETTINGS.time_scale
        for op in chunk:
            requests.append(_declaration(op, factor))
            if not isinstance(op, StepOp):
                continue
            definition = resolve_step(self.registry, op.definition.name)
            if definition.limit is not None:
                mark = step_limits.declared_limit(definition, op.input, self.log.run_id, op.id)
                if mark is not None:  # which limit (and key) it will wait for: describe and the viewer show it
                    requests[-1]["eventData"][step_limits.LIMIT_FIELD] = mark
            if op is born:
                requests.append(start_event(op.id, definition, op.poll, self.claims.message_id, inline=True,
                                            deadline=self.deadline, taken=self.claims.taken.get(op.id)))
        return requests

    async def _chunk(self, execution: WorkflowExecution, chunk: list[StepOp | WaitOp],
                             born: StepOp | None) -> None:
        requests = self._declarations(chunk, born)
        await self._landed(execution, chunk, born, await self.log.write_batch(requests), len(requests))

    async def _with_end(self, execution: WorkflowExecution, chunk: list[StepOp | WaitOp],
                                born: StepOp | None) -> bool:
        """The pending outcome with ``chunk``: False when that write failed and the outcome was recorded the
        old way instead (the execution is replaced)."""
        pending = self.provisional.take()
        requests = self._declarations(chunk, born)
        try:
            results = await self.provisional.write_with_end(pending, requests)
        except Exception as error:  # any refusal, or no answer: the old way decides (see fall_back)
            await self.provisional.fall_back(pending, error)
            return False
        self.provisional.rode_with_next()
        await self._landed(execution, chunk, born, results[1:], len(requests))
        await self.provisional.recorded(pending, written(pending.end))
        return True

    async def _landed(self, execution: WorkflowExecution, chunk: list[StepOp | WaitOp], born: StepOp | None,
                      results: list[BatchEventOutcome], requested: int) -> None:
        outcomes = iter(results)
        landed = []
        for op in chunk:
            outcome = next(outcomes)
            started = next(outcomes) if op is born else None
            if outcome.ok and outcome.result is not None and outcome.result.event is not None:
                landed.append(outcome.result.event)
                if isinstance(op, StepOp):
                    self.claims.owned.add(op.id)
                if started is not None and started.result is not None and started.result.event is not None:
                    landed.append(started.result.event)
                    self.claims.claimed[op.id] = started.result
            elif outcome.status == 413:
                execution.refuse(op, too_large(op, "input", outcome.message))
            elif outcome.status != 409:
                raise RuntimeError(f"declaring {op.id} failed: {outcome.message}")
        await self.log.append(landed)
        if len(landed) < requested:
            await self.log.reload_tail()  # someone else declared some of them: take their events

    async def cancel_steps(self, execution: WorkflowExecution) -> bool:
        """Record the end of every step whose await the workflow cancelled, as ``step_failed`` marked cancelled
        (one batched write): that is what a queued attempt's status check finds (it stops its body), what makes a
        message for a step not started yet find it ended (it never runs), and what replays turn back into the
        ``CancelledError`` the workflow saw. A 409 means the step ended first (its outcome landed before the
        cancellation): that end stays, and the workflow still sees the cancellation on every replay, because its
        code cancels the future at the same point before that event is replayed."""
        steps = execution.cancelled_steps()
        if not steps:
            return False
        for step in steps:  # never to run here: their end is the cancellation
            self.claims.drop(step.id)
        for start in range(0, len(steps), BATCH):
            chunk = steps[start:start + BATCH]
            results = await self.log.write_batch([
                {"eventType": "step_failed", "correlationId": step.id,
                 "eventData": {"error": step_cancelled_error(step.definition.name)}} for step in chunk])
            landed = [o.result.event for o in results if o.ok and o.result is not None and o.result.event]
            failed = [o for o in results if not o.ok and o.status != 409]
            if failed:
                raise RuntimeError(f"recording a cancelled step failed: {failed[0].message}")
            await self.log.append(landed)
            if len(landed) < len(chunk):
                await self.log.reload_tail()  # ended first by another writer: take its end
        # One that waited for its limit leaves the waiters now, not at a grant (``step_limits``; a pass over the
        # log and no I/O for steps without a limit).
        await step_limits.free_cancelled_steps(self.log.world, self.registry, self.log.run_id, execution.log,
                                               [step.id for step in steps])
        return True

    async def dispose(self, execution: WorkflowExecution) -> bool:
        hooks = execution.disposals()
        for hook in hooks:
            try:
                await self.log.write({"eventType": "hook_disposed", "correlationId": hook.id})
            except EntityConflictError:
                await self.log.reload_tail()
        return bool(hooks)

    async def complete_due_waits(self, execution: WorkflowExecution) -> bool:
        now = clock_of(self.log.world).now()
        due = [w for w in execution.pending_waits() if w.resume_at <= now]
        for wait in due:
            try:
                await self.log.write({"eventType": "wait_completed", "correlationId": wait.id})
            except EntityConflictError:
                await self.log.reload_tail()
        return bool(due)


def _declaration(op: StepOp | WaitOp, factor: float) -> dict[str, Any]:
    """``op``'s ``*_created``; a wait under a time scale ``factor`` ends that much sooner (``_engine.time_scale``)."""
    if isinstance(op, StepOp):
        return {"eventType": "step_created", "correlationId": op.id, "eventData": named(op, {
            "stepName": op.definition.name, "input": op.input, "inputDigest": op.digest})}
    scale = TimeScale(factor, op.declared_at or op.resume_at)
    return {"eventType": "wait_created", "correlationId": op.id, "eventData": named(op, scale.mark(
        {"resumeAt": scale.real(op.resume_at).astimezone(UTC).isoformat()}))}
