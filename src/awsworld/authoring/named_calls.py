"""``with_name``: one step or child call with a display name (see ``names`` for what a name is and costs)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar, cast

from .definitions import StepDef, WorkflowDef
from .names import check_name
from .runtime import call_step, call_workflow, current_runtime, made

P = ParamSpec("P")
R = TypeVar("R")


class Named:
    """``with_name(name)``: a call with a display name. ``await with_name("charge card").call(charge, order)``."""

    def __init__(self, name: str) -> None:
        self.name = check_name(name)

    def call(self, fn: Callable[P, Coroutine[Any, Any, R]], /, *args: P.args,
             **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        """Call the step or workflow ``fn`` (a workflow: as a child run, awaited) under this name. Outside a
        workflow it is a plain call, as ``fn(*args, **kwargs)`` is; the name is then unused. Like a plain call, it
        runs when awaited, and one a workflow body never awaits fails the run (``CallNotAwaitedError``)."""
        runtime = current_runtime.get()
        step = getattr(fn, "__awsworld_step__", None)
        flow = getattr(fn, "__awsworld_workflow__", None)
        if not isinstance(step, StepDef) and not isinstance(flow, WorkflowDef):
            raise TypeError(f"with_name(...).call needs a @step or a @workflow, got {fn!r}")
        if runtime is None:
            return fn(*args, **kwargs)
        if isinstance(step, StepDef):
            return made(runtime, cast("Coroutine[Any, Any, R]", call_step(runtime, step, args, kwargs, self.name)),
                        "step", step.name)
        assert isinstance(flow, WorkflowDef)
        return made(runtime, cast("Coroutine[Any, Any, R]", call_workflow(runtime, flow, args, kwargs,
                                                                          name=self.name)), "child workflow", flow.name)


def with_name(name: str) -> Named:
    """Name one call for the log: ``await with_name("charge card").call(charge, order_id)``. (An options object,
    as ``child_options`` and ``Client.options`` are: a ``name=`` keyword beside ``*args: P.args`` and ``**kwargs:
    P.kwargs`` is not allowed by PEP 612, and the step's own parameters must stay checked.) ``sleep``,
    ``create_hook`` and ``child_options`` take ``name=`` directly; ``map`` and ``parallel`` label their items."""
    return Named(name)


__all__ = ["Named", "with_name"]
