"""What the runtime says about a step attempt its delivery was cut off from, and about a step whose own timeout the
flow function's cannot honour.

A step body runs inside one delivery, one invocation of the flow function (``lambda_host/flow.py``), inline or as a
queued step's message: Lambda stops the invocation at the function's timeout (the template's ``FlowTimeoutSeconds``,
``AWSWORLD_FLOW_TIMEOUT_SECONDS``; ``_worker/invoker.py`` does the same for the emulators), body and all, and nothing
of the attempt is written. A later delivery finds the attempt started and unfinished (its lease passed, or its own
message came back) and starts the next attempt, or records the last one failed (``step_runner.interrupted_end``).
What it knows of the dead attempt is what its start recorded: when it began and its lease, which is what its
delivery had left of its budget then, plus the lease grace (``world.rules.leases.lease_seconds``), or the step's own
timeout when that was shorter. So when the lease came from the budget, the invocation's time ran out at most that
budget plus the margin the delivery keeps after it (``DELIVERY_MARGIN_SECONDS``) after the attempt began: that is
said, with the function's timeout and the parameter that raises it. Before, the attempt failed "after N attempts
(its delivery was cut off)" and nothing said why or what to do (a three-minute step failed so on every attempt on a
stack whose function stops at 120 s).

A ``@step(timeout=...)`` longer than one invocation can run is warned about when the flow function loads its
modules (``steps_outliving_the_function``, ``lambda_host/container.py``), not refused where the workflow calls the
step: a refusal at the call would be a new failure at the replay of runs that called it already (their logs hold
the call), and the same code runs as written once ``FlowTimeoutSeconds`` is raised.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime

from ..authoring.definitions import StepDef
from ..settings import MAX_FLOW_TIMEOUT_SECONDS, Settings
from ..world.queue import flow_function_timeout_seconds
from ..world.rules.leases import DELIVERY_MARGIN_SECONDS, lease_grace_seconds

CANCEL_GRACE_SECONDS = 1.0
"""How long a step body that swallows its timeout's cancellation gets to stop before it is left behind."""
TIMEOUT_PARAMETER = "FlowTimeoutSeconds"
"""The SAM template's parameter for the flow function's timeout (``Settings.flow_timeout_seconds``)."""


def delivery_ran_out(step_timeout: float | None, started_at: datetime | None,
                     lease_until: datetime | None) -> float | None:
    """Seconds after the attempt began by which its delivery's invocation ran out of time, when its lease says so:
    the budget it had left then plus the margin. None when the attempt's start recorded no lease, or when its lease
    came from the step's own timeout (that timeout would have stopped the body first: the delivery died otherwise,
    its process crashed or ran out of memory)."""
    if started_at is None or lease_until is None:
        return None
    asked = (lease_until - started_at).total_seconds() - lease_grace_seconds()
    if step_timeout is not None and math.isclose(asked, step_timeout + CANCEL_GRACE_SECONDS, abs_tol=0.01):
        return None
    return max(0.0, asked) + DELIVERY_MARGIN_SECONDS


def cut_off_reason(step_timeout: float | None, started_at: datetime | None, lease_until: datetime | None) -> str:
    """Why an attempt never finished, for its recorded error and the log: "its delivery was cut off", and when the
    invocation's time ran out, how long after the attempt began and what raises it. ``step_timeout``: the step's
    ``@step(timeout=...)``, which its lease may have come from."""
    ran_out = delivery_ran_out(step_timeout, started_at, lease_until)
    if ran_out is None:
        return "its delivery was cut off"
    return (f"its delivery was cut off at most {ran_out:.0f} s after the attempt began, when the flow function's "
            f"timeout ({flow_function_timeout_seconds()} s) stopped it: a step attempt runs within one invocation; "
            f"for a step that needs longer, raise the stack's {TIMEOUT_PARAMETER} parameter (up to "
            f"{MAX_FLOW_TIMEOUT_SECONDS} s, {Settings.flow_timeout_seconds.env}) or split the work")


def longest_attempt_seconds() -> float:
    """The longest a step attempt can run in one invocation: the flow function's timeout less the delivery's
    margin (a budget of the whole invocation, from a delivery's first moment)."""
    return flow_function_timeout_seconds() - DELIVERY_MARGIN_SECONDS


def steps_outliving_the_function(steps: Iterable[StepDef]) -> list[str]:
    """A warning for each step whose ``timeout`` is longer than one invocation can run it: that timeout can never
    fire, the function's stops the attempt first (and its cut-off attempt is retried, then failed)."""
    longest = longest_attempt_seconds()
    return [f"step {definition.name!r} has timeout={definition.timeout:g}s, but the flow function stops every "
            f"delivery after {flow_function_timeout_seconds()} s, so an attempt runs {longest:g} s at most and that "
            f"timeout never fires: raise the stack's {TIMEOUT_PARAMETER} parameter (up to "
            f"{MAX_FLOW_TIMEOUT_SECONDS} s, {Settings.flow_timeout_seconds.env}) or shorten the timeout"
            for definition in steps if definition.timeout is not None and definition.timeout > longest]
