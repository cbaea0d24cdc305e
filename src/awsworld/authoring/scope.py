"""Where code is running: inside a workflow replay (durable calls) or inside a step body (metadata, streams)."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..engine.execution import WorkflowExecution
    from .step_context import StepContext

current_execution: ContextVar[WorkflowExecution | None] = ContextVar("awsworld_execution", default=None)
current_step: ContextVar[StepContext | None] = ContextVar("awsworld_step", default=None)


def require_execution(what: str) -> WorkflowExecution:
    execution = current_execution.get()
    if execution is None:
        raise RuntimeError(f"{what} can only be used inside a @workflow")
    return execution

