"""Where code is running: inside a workflow replay (durable calls) or inside a step body (metadata, streams)."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..engine.execution import WorkflowExecution
    from .step_context import StepContext

current_execution: ContextVar[WorkflowExecution | None] = ContextVar("awsworld_execution", default=None)
current_step: ContextVar[StepContext | None] = ContextVar("awsworld_step", default=None)

StepEnd = Literal["completed", "failed"]
wakes_on: ContextVar[frozenset[StepEnd]] = ContextVar("awsworld_wakes_on", default=frozenset())
"""The ends of a step declared here that wake the workflow at once, though other steps of the run are still open
(by default a queued step's end continues the workflow only when it was the run's last open step, which is all a
``gather`` needs). Set by a batch in each item's task (``authoring/batch.py``): an item's end may decide the batch
or free a slot. Carried by the step's queue message (``FlowMessage.wakes_on``)."""


def require_execution(what: str) -> WorkflowExecution:
    execution = current_execution.get()
    if execution is None:
        raise RuntimeError(f"{what} can only be used inside a @workflow")
    return execution

