"""How a flow ends its run: completing or failing it (the workflow's value, a structured error), recording patch
markers before anything else it writes, and the divergence policy (a replay that does not match its log: recover a
few times from a fresh replay, then fail the run with a message that names the call, or under the park policy
mark it parked and come back later: ``_engine.parking``).
"""

from __future__ import annotations

import logging
from typing import Any

from .._engine import divergence as dv
from .._engine.execution import PATCH_MARKER_PREFIX, WorkflowExecution
from .._engine.parking import Parked, mark, parked_from, ways_out
from ..authoring.errors import (
    CORRUPTED_EVENT_LOG,
    SERIALIZATION_ERROR,
    USER_ERROR,
    VALUE_TOO_LARGE,
    CodecError,
    ReplayDivergenceError,
)
from ..durable import codecs, serde
from ..durable.codecs import Place
from ..settings import SETTINGS
from ..world.clock import clock_of
from ..world.errors import EntityConflictError, PayloadTooLargeError
from ..world.limits import oversized, too_large_text
from ..world.messages import FlowMessage
from .error_shapes import log_failure, note_calls_after, structured_error
from .flow_messages import FlowMessages, queue_come_back
from .flow_state import MAX_DIVERGENT_RECOVERIES, FlowLog
from .recovery import rest

log = logging.getLogger("awsworld.flow")


class RunEndings:
    """Ends the run ``log`` holds (its result or error, the divergence policy) and keeps its parked mark."""

    def __init__(self, log: FlowLog, messages: FlowMessages) -> None:
        self.log = log
        self.messages = messages
        self.message = messages.message
        self.run_id = log.run_id
        self.world = log.world
        self.parked: Parked | None = None
        """The run's parked mark as its log left it (``_engine.parking``): cleared by the first replay that
        matches."""

    async def finish(self, execution: WorkflowExecution) -> str:
        assert execution.task is not None
        error = execution.task.exception() if not execution.task.cancelled() else None
        if error is None and not execution.task.cancelled():
            returned = execution.task.result()
            # (over the World's bound, refused before it is dumped, as the World would refuse it once written)
            too_large = oversized(returned, "eventData.output", self.world.max_value_bytes) \
                if execution.definition.codec is None else None
            if too_large is not None:
                return await self.too_large(too_large)
            try:
                output = codecs.store(returned, execution.definition.codec,
                                      Place("result", f"workflow {execution.definition.name!r}", self.run_id))
            except CodecError as bad:
                return await self.fail(structured_error(bad), SERIALIZATION_ERROR)
            except serde.SerializationError as bad:
                return await self.fail({"message": f"the workflow's return value cannot be serialized: {bad}",
                                         "name": "FatalError"}, SERIALIZATION_ERROR)
            try:
                await self.log.write({"eventType": "run_completed", "eventData": {"output": output}})
            except EntityConflictError:
                return "gone"
            except PayloadTooLargeError as too_large:
                return await self.too_large(too_large)
            return "completed"
        if error is None:
            return await self.fail({"message": "cancelled"}, USER_ERROR)
        return await self.fail(note_calls_after(structured_error(error), execution.log), USER_ERROR)

    async def too_large(self, refusal: PayloadTooLargeError) -> str:
        """Fail the run whose return value the World refuses (or would refuse) as too large."""
        return await self.fail({"message": too_large_text("the workflow's return value", refusal.message),
                                "name": "ValueTooLargeError"}, VALUE_TOO_LARGE)

    async def fail(self, error: dict[str, Any], code: str) -> str:
        try:
            await self.log.write({"eventType": "run_failed", "eventData": {"error": error, "errorCode": code}})
        except EntityConflictError:
            return "gone"
        log_failure(self.run_id, self.message.workflow_name, error, code)
        return "failed"

    async def record_markers(self, execution: WorkflowExecution) -> None:
        """``patched()`` answered True at the log's frontier: record it (one attr_set for all change ids)."""
        markers = execution.take_markers()
        await self.log.write({"eventType": "attr_set", "eventData": {"changes": [
            {"key": f"{PATCH_MARKER_PREFIX}{change_id}", "value": str(at)} for change_id, at in markers.items()]}})

    async def diverged(self, divergence: ReplayDivergenceError) -> str:
        """Recover with a new delivery (replay from the start) up to three times; then fail the run naming the
        divergence, or under ``AWSWORLD_ON_DIVERGENCE=park`` mark it parked (``_engine.parking``), keep it running
        and redeliver it every ``AWSWORLD_PARK_SECONDS`` (an hour) so a revert or a ``patched()`` fix picks it up.
        A run parked already is parked again at once, whatever brought it (its redelivery, the watchdog's wake, a
        hook): recovering it three times more would cost three deliveries each time it comes back.
        The log lines name the position and the kind of difference only: the calls may quote user payloads."""
        count = self.message.divergence
        park = SETTINGS.on_divergence == "park"
        stays = park and self.parked is not None
        then = ("it stays parked" if stays else f"recovery {count + 1} of {MAX_DIVERGENT_RECOVERIES}"
                if count < MAX_DIVERGENT_RECOVERIES else "the run is parked" if park else "the run fails")
        log.warning("replay of run %s diverged from its log at %s (event %s, %s differs); %s",
                    self.run_id, divergence.position, divergence.slot, divergence.change, then)
        if count >= MAX_DIVERGENT_RECOVERIES and not park:
            message = await self._divergence_message(divergence)
            return await self.fail({"message": message, "name": "ReplayDivergenceError"}, CORRUPTED_EVENT_LOG)
        parking = stays or (park and count >= MAX_DIVERGENT_RECOVERIES)
        if parking:
            if self.log.execution is not None:
                await self._park(divergence)
            await self._come_back(count)
            return "parked"
        follow_up = FlowMessage(self.run_id, self.message.workflow_name, divergence=count + 1,
                                deployment=self.message.deployment)
        await self.world.queue(self.messages.queue_name, follow_up.to_payload(),
                               idempotency_key=f"{self.run_id}:diverged:{follow_up.divergence}")
        return "diverged"

    async def _come_back(self, count: int) -> None:
        """Bring the parked run back in ``AWSWORLD_PARK_SECONDS`` (``flow_messages.queue_come_back``: a delayed
        message within one queue message's reach, else the watchdog's wake), resting with the due it answers. A
        lost wake is the watchdog's as any other (it snoozed the run first: it comes back a horizon later)."""
        now = clock_of(self.world).now()
        follow_up = FlowMessage(self.run_id, self.message.workflow_name, divergence=count + 1,
                                deployment=self.message.deployment)
        due = await queue_come_back(self.world, follow_up, now, SETTINGS.park_seconds)
        if self.log.execution is not None:
            await rest(self.world, self.message, self.log.execution, now, resting=True, due=due)

    async def _park(self, divergence: ReplayDivergenceError) -> None:
        """Mark the run parked, in its log (one in-band ``attr_set``); a run parked at the same place already is
        left as it is, so an hourly redelivery writes nothing."""
        parked = parked_from(divergence, clock_of(self.world).now()).kept_since(self.parked)
        if parked.same_place(self.parked):
            return
        await self.log.write({"eventType": "attr_set", "eventData": {"changes": [mark(parked)]}})
        self.parked = parked
        log.warning("run %s is parked: its replay differs from its log at %s (event %s); %s; `awsworld describe "
                    "%s` says where", self.run_id, divergence.position, divergence.slot,
                    ways_out(self.run_id, divergence.change, self.message.deployment),
                    self.run_id)

    async def unpark(self) -> None:
        """The run replayed without a divergence: it is not parked any more (written before anything else the
        delivery writes, so a reader never sees a parked run move)."""
        await self.log.write({"eventType": "attr_set", "eventData": {"changes": [mark(None)]}})
        self.parked = None
        log.warning("run %s resumes: it was parked, and its replay matches its log again", self.run_id)

    async def _divergence_message(self, divergence: ReplayDivergenceError) -> str:
        """The run's error: where, what the log holds, what the code did — with the logged arguments, which the
        flow reads without (one read, once per failed run)."""
        step_id = divergence.step_id
        text = str(divergence)
        if step_id is not None:
            try:
                step = await self.world.steps.get(self.run_id, step_id)
                logged = dv.step_call(step.step_name, step.input, whole=divergence.change == "name")
                text = text.replace(divergence.log or "", logged, 1) if divergence.log else text
            except Exception:  # the message is best effort; the failure itself must be recorded
                pass
        if divergence.change == "value":  # (its own note says what to change)
            return f"{dv.REPLAY_UNREADABLE}: {text}"
        if divergence.change == "parameters":  # (so does this one's)
            return f"{dv.REPLAY_UNBOUND}: {text}"
        return f"{dv.REPLAY_DIFFERS}: {text}. {dv.WHY_IT_DIFFERS}"
