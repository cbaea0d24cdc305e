"""How a flow ends its run: completing or failing it (the workflow's value, a structured error), recording patch
markers before anything else it writes, and the divergence policy (a replay that no longer matches its log:
recover a few times from a fresh replay, then fail the run with a message that names the call).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from ..authoring.codecs import Place
from ..authoring.errors import (
    CORRUPTED_EVENT_LOG,
    SERIALIZATION_ERROR,
    USER_ERROR,
    VALUE_TOO_LARGE,
    CodecError,
    ReplayDivergenceError,
)
from ..engine import codecs, serde
from ..engine import divergence as dv
from ..engine.execution import PATCH_MARKER_PREFIX, WorkflowExecution
from ..settings import SETTINGS
from ..world.clock import clock_of
from ..world.errors import EntityConflictError, PayloadTooLargeError
from ..world.messages import FlowMessage, queue_name_for
from ..world.watch import quiet_due
from .declarations import Declarations
from .error_shapes import log_failure, structured_error
from .flow_state import MAX_DIVERGENT_RECOVERIES
from .recovery import rest

log = logging.getLogger("awsworld.flow")


class Endings(Declarations):
    """A flow that can end its run."""


    async def _finish(self, execution: WorkflowExecution) -> str:
        assert execution.task is not None
        error = execution.task.exception() if not execution.task.cancelled() else None
        if error is None and not execution.task.cancelled():
            try:
                output = codecs.store(execution.task.result(), execution.definition.codec,
                                      Place("result", f"workflow {execution.definition.name!r}", self.run_id))
            except CodecError as bad:
                return await self._fail(structured_error(bad), SERIALIZATION_ERROR)
            except serde.SerializationError as bad:
                return await self._fail({"message": f"the workflow's return value cannot be serialized: {bad}",
                                         "name": "FatalError"}, SERIALIZATION_ERROR)
            try:
                await self._write({"eventType": "run_completed", "eventData": {"output": output}})
            except EntityConflictError:
                return "gone"
            except PayloadTooLargeError as too_large:
                return await self._fail({"message": f"the workflow's return value is too large to record: "
                                                    f"{too_large.message}", "name": "ValueTooLargeError"},
                                        VALUE_TOO_LARGE)
            return "completed"
        return await self._fail(structured_error(error) if error else {"message": "cancelled"}, USER_ERROR)

    async def _fail(self, error: dict[str, Any], code: str) -> str:
        try:
            await self._write({"eventType": "run_failed", "eventData": {"error": error, "errorCode": code}})
        except EntityConflictError:
            return "gone"
        log_failure(self.run_id, self.message.workflow_name, error, code)
        return "failed"

    async def _record_markers(self, execution: WorkflowExecution) -> None:
        """``patched()`` answered True at the log's frontier: record it (one attr_set for all change ids)."""
        markers = execution.take_markers()
        await self._write({"eventType": "attr_set", "eventData": {"changes": [
            {"key": f"{PATCH_MARKER_PREFIX}{change_id}", "value": str(at)} for change_id, at in markers.items()]}})

    async def _diverged(self, divergence: ReplayDivergenceError) -> str:
        """Recover with a new delivery (replay from the start) up to three times; then fail the run naming the
        divergence, or under ``AWSWORLD_ON_DIVERGENCE=park`` keep it running and redeliver it every
        ``AWSWORLD_PARK_SECONDS`` (an hour) so a code rollback picks it up. The log line names the position and
        the kind of change only: the calls may quote user payloads."""
        count = self.message.divergence
        park = SETTINGS.on_divergence == "park"
        log.warning("replay of run %s diverged from its log at %s (event %s, %s changed); recovery %d",
                    self.run_id, divergence.position, divergence.slot, divergence.change, count + 1)
        if count >= MAX_DIVERGENT_RECOVERIES and not park:
            message = await self._divergence_message(divergence)
            return await self._fail({"message": message, "name": "ReplayDivergenceError"}, CORRUPTED_EVENT_LOG)
        follow_up = FlowMessage(self.run_id, self.message.workflow_name, divergence=count + 1)
        delay = SETTINGS.park_seconds if park and count >= MAX_DIVERGENT_RECOVERIES else None
        await self.world.queue(queue_name_for(self.message.workflow_name), follow_up.to_payload(),
                               idempotency_key=f"{self.run_id}:diverged:{follow_up.divergence}", delay_seconds=delay)
        if delay is not None and self.execution is not None:  # parked: its next delivery is due in an hour
            now = clock_of(self.world).now()
            await rest(self.world, self.message, self.execution, now, resting=True,
                       due=quiet_due([now + timedelta(seconds=delay)]))
        return "parked" if delay is not None else "diverged"

    async def _divergence_message(self, divergence: ReplayDivergenceError) -> str:
        """The run's error: where, what the log holds, what the code did — with the logged arguments, which the
        flow reads without (one read, once per failed run)."""
        step_id = divergence.step_id
        text = str(divergence)
        if step_id is not None:
            try:
                step = await self.world.steps.get(self.run_id, step_id)
                logged = dv.step_call(step.step_name, step.input)
                text = text.replace(divergence.log or "", logged, 1) if divergence.log else text
            except Exception:  # the message is best effort; the failure itself must be recorded
                pass
        return (f"the workflow's code no longer matches this run's history: {text}. Roll the code back (or "
                "branch with awsworld.patched()) to keep such runs going; awsworld replay checks stored runs "
                "against new code before a deploy")
