"""Logs, metrics and (optionally) traces for the Lambda handlers, all from Powertools.

One module decides what is recorded, so the code, the dashboard in ``infra/`` and the alarms agree on names:

- Logs are JSON lines (Powertools Logger) carrying ids — ``runId``, ``stepId``, ``messageId`` (awsworld's
  stable id), ``sqsMessageId`` — and statuses, sizes and counts. Never payloads, hook tokens, or request
  headers: a payload can hold anything a user sends, and a webhook token is the webhook's only secret.
  awsworld's own ``logging`` loggers (``awsworld.*``) get the same handler and formatter, so their lines are
  JSON with the same ids. Per-record keys live in a context variable, which each concurrently processed
  record (an asyncio task) has its own copy of. Of the Lambda context, a line keeps what an operator correlates
  by, under Powertools' own key names: ``function_request_id`` (the invocation: Lambda's ``START``/``REPORT``
  lines name it too), ``cold_start: true`` on the lines of the invocation that started its environment (absent
  on a warm one), and ``xray_trace_id`` only when tracing is on. Powertools' ``inject_lambda_context`` would add
  ``function_name``, ``function_memory_size``, ``function_arn``, ``cold_start: false`` and (Lambda sets the
  trace header traced or not) the trace id to every line: about 240 B of a 450 to 800 B line, billed per byte
  by CloudWatch, and said once already by the log group's name (``/aws/lambda/<stack>-flow``) and the
  ``REPORT`` line (bench/cloudwatch_bytes.py measures it).
- Metrics are CloudWatch Embedded Metric Format lines (Powertools Metrics) under one namespace (``awsworld``
  unless ``POWERTOOLS_METRICS_NAMESPACE`` says otherwise) with the ``service`` dimension set to
  ``POWERTOOLS_SERVICE_NAME`` (the template uses the stack name, so two stages never mix their numbers).
  They cost no API call: CloudWatch extracts them from the log lines.
- Tracing is opt-in (``AWSWORLD_TRACING=true``, set by the template's ``EnableTracing``): X-Ray adds cost and
  needs the X-Ray SDK; without it the handlers run untraced.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import warnings
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider import cold_start

from .._worker.delivery import (
    DEAD_LETTERED,
    DEFERRED_HOPS,
    DELIVERY_ERRORS,
    FLOW_DELIVERIES,
    MALFORMED_MESSAGES,
    PUSHED_DELIVERIES,
    QUEUE_LAG,
    REFUSED_MESSAGES,
    RUNS_STARTED,
    RUNS_STUCK,
    RUNS_WOKEN,
    STEP_DELIVERIES,
    UNKNOWN_WORKFLOW,
)
from .._worker.dispatch import Outcome
from .._worker.rerouting import DEPLOYMENT_MISMATCHES, REROUTED, UNREACHABLE
from ..settings import SETTINGS, Settings

NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "awsworld"
SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "awsworld"
TRACING_ENV = Settings.tracing.env

# Metric names: the dashboard (infra/monitoring.yaml) and the tests use these exact strings. The delivery path
# (``awsworld._worker.delivery``) names what it counts; the rest are counted here from its outcomes.
RUNS_COMPLETED = "RunsCompleted"
RUNS_FAILED = "RunsFailed"
STEPS_INLINE = "StepsInline"
STEPS_QUEUED = "StepsQueued"
INLINE_LOOP_ITERATIONS = "InlineLoopIterations"
STEP_RETRIES = "StepRetries"
REDELIVERIES = "Redeliveries"
BUDGET_EXHAUSTED = "BudgetExhausted"
WEBHOOKS_RESUMED = "WebhooksResumed"
WEBHOOKS_REJECTED = "WebhooksRejected"
RUNS_PARKED = "RunsParked"  # deliveries of runs whose code diverged, kept running (AWSWORLD_ON_DIVERGENCE=park)

METRIC_NAMES = (
    FLOW_DELIVERIES, STEP_DELIVERIES, RUNS_STARTED, RUNS_COMPLETED, RUNS_FAILED, STEPS_INLINE, STEPS_QUEUED,
    INLINE_LOOP_ITERATIONS, STEP_RETRIES, REDELIVERIES, BUDGET_EXHAUSTED, QUEUE_LAG, DELIVERY_ERRORS,
    UNKNOWN_WORKFLOW, MALFORMED_MESSAGES, REFUSED_MESSAGES, DEFERRED_HOPS, DEAD_LETTERED, WEBHOOKS_RESUMED,
    WEBHOOKS_REJECTED, RUNS_PARKED, RUNS_WOKEN, RUNS_STUCK, PUSHED_DELIVERIES, REROUTED, UNREACHABLE,
    DEPLOYMENT_MISMATCHES,
)


class _Stdout:
    """Writes to whatever ``sys.stdout`` is at the time of the write (Lambda ships stdout to CloudWatch Logs;
    a test capturing stdout swaps it after this module was imported)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


logger = Logger(service=SERVICE, stream=_Stdout(), use_rfc3339=True)  # type: ignore[arg-type]
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)

# An invocation that only acknowledged (say, a long delay's early hop) has no metric to flush: not a problem.
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)


def _without_task_name(record: logging.LogRecord) -> bool:
    """Python 3.12+ names the asyncio task on every record logged inside one, and Powertools writes any record
    attribute it does not know as a key: "taskName":"Task-38" on each delivery's lines (a record runs as a task),
    about 20 B a line on Lambda's Python 3.13 that names nothing an operator looks for (``sqsMessageId`` and
    ``messageId`` say which record). Unset on the records this handler writes (Powertools leaves a None key
    out), not by the standard library's process-wide ``logging.logAsyncioTasks``: importing this module changes
    nothing of the process's other logging."""
    if "taskName" in vars(record):
        vars(record)["taskName"] = None
    return True


logger.registered_handler.addFilter(_without_task_name)

# awsworld's internal loggers (awsworld.queue, awsworld.lambda, ...) write through the same JSON handler.
logging.getLogger("awsworld")
copy_config_to_registered_loggers(source_logger=logger, include={"awsworld"})


# Metrics are recorded only inside an instrumented invocation, which flushes them when it ends. The same code
# also runs uninstrumented (``awsworld dev`` routes webhooks through ``webhook.handle``; tests call it): there a
# metric would wait, process-wide, in Powertools' shared metric set until some later invocation flushed it under
# its own name, or pile up for good in a long-running dev server.
_invocation: ContextVar[bool] = ContextVar("awsworld_instrumented_invocation", default=False)


def count(name: str, value: float = 1) -> None:
    if value and _invocation.get():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def milliseconds(name: str, value: float) -> None:
    if _invocation.get():
        metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=max(0.0, value))


def record_outcome(outcome: Outcome) -> None:
    """Metrics for what one delivery did, read off the worker's ``Outcome`` status and loop statistics."""
    status = outcome.status
    if status in ("completed", "step-then-completed"):
        count(RUNS_COMPLETED)
    elif status in ("failed", "step-then-failed"):
        count(RUNS_FAILED)
    if status.endswith("continued"):
        count(BUDGET_EXHAUSTED)
    if status == "retry-queued":
        count(STEP_RETRIES)
    if status in ("parked", "step-then-parked"):
        count(RUNS_PARKED)
    if not outcome.ack:
        count(REDELIVERIES)
    count(STEPS_INLINE, outcome.stats.inline_steps)
    count(STEPS_QUEUED, outcome.stats.queued_steps)
    count(INLINE_LOOP_ITERATIONS, outcome.stats.iterations)


Handler = TypeVar("Handler", bound=Callable[..., Any])


def _with_log_keys(handler: Handler, traced: bool) -> Handler:
    """Each invocation starts its log lines afresh (no key of the last invocation or its records stays) with the
    Lambda context keys the module docstring lists. ``cold_start`` is read off the flag the ``ColdStart`` metric
    is counted by (Powertools' metrics provider), so the lines and the metric agree: this wrapper runs before
    ``log_metrics``, which clears the flag."""

    @functools.wraps(handler)
    def invocation(event: Any, context: Any, *rest: Any) -> Any:
        logger.clear_state()
        logger.append_keys(function_request_id=context.aws_request_id,
                           cold_start=True if cold_start.is_cold_start else None)  # None: no key at all
        if not traced:
            logger.append_keys(xray_trace_id=None)  # Powertools' way to leave the trace id out (Logger docs)
        return handler(event, context, *rest)

    return invocation  # type: ignore[return-value]


def instrument(handler: Handler) -> Handler:
    """Wrap a Lambda handler: the invocation's request id in every log line (and ``cold_start``, the trace id,
    where they say something: see the module docstring), metrics flushed (with a cold-start count) at the end of
    each invocation, and an X-Ray subsegment when tracing is on. The event is never logged."""

    @functools.wraps(handler)
    def invocation(event: Any, context: Any, *rest: Any) -> Any:  # rest: a host's container (tests/chaos)
        token = _invocation.set(True)
        try:
            return handler(event, context, *rest)
        finally:
            _invocation.reset(token)

    traced = SETTINGS.tracing
    wrapped = metrics.log_metrics(invocation, capture_cold_start_metric=True)
    wrapped = _with_log_keys(wrapped, traced)
    if traced:
        from aws_lambda_powertools import Tracer  # needs aws-xray-sdk: imported only when tracing is asked for

        # No auto-patching: X-Ray's thread-local segment context does not follow concurrent asyncio tasks, so
        # per-call subsegments of botocore (on the World's worker threads) would nest wrongly. The invocation is
        # one traced subsegment.
        tracer = Tracer(service=SERVICE, auto_patch=False)
        wrapped = tracer.capture_lambda_handler(wrapped, capture_response=False)
    return wrapped  # type: ignore[return-value]
