"""Logs, metrics and (optionally) traces for the Lambda handlers, all from Powertools.

One module decides what is recorded, so the code, the dashboard in ``infra/`` and the alarms agree on names:

- Logs are JSON lines (Powertools Logger) carrying ids — ``runId``, ``stepId``, ``messageId`` (awsworld's stable
  id), ``sqsMessageId`` — and statuses, sizes and counts. Never payloads, hook tokens, or request headers: a payload
  can hold anything a user sends, and a webhook token is the webhook's only secret. awsworld's own ``logging``
  loggers (``awsworld.*``) get the same handler and formatter, so their lines are JSON with the same ids; so are the
  lines of the user's own loggers in step and workflow code, with the run's and step's keys
  (``log_every_line_here``, ``_with_run_keys``). Per-record keys live in a context variable, which each concurrently
  processed record (an asyncio task) has its own copy of. Of the Lambda context, a line keeps what an operator
  correlates by, under Powertools' own key names: ``function_request_id`` (the invocation: Lambda's
  ``START``/``REPORT`` lines name it too), ``cold_start: true`` on the lines of the invocation that started its
  environment (absent on a warm one), and ``xray_trace_id`` only when tracing is on. Powertools'
  ``inject_lambda_context`` would add ``function_name``, ``function_memory_size``, ``function_arn``,
  ``cold_start: false`` and (Lambda sets the trace header traced or not) the trace id to every line: about 240 B of
  a 450 to 800 B line, billed per byte by CloudWatch, and said once already by the log group's name
  (``/aws/lambda/<stack>-flow``) and the ``REPORT`` line (bench/cloudwatch_bytes.py measures it).
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
from aws_lambda_powertools.logging.formatter import THREAD_LOCAL_KEYS
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider import cold_start

from .._engine.execution import follow_deliveries
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
from ..authoring.runtime import current_runtime
from ..authoring.step_context import current_step
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


def _with_run_keys(record: logging.LogRecord) -> bool:
    """The run and step a line was written in, read off the code that wrote it, for the lines of the user's own
    loggers (``logging.getLogger("shop.orders")`` in a step or workflow body), which name neither: in a step's
    body ``runId``, ``stepId``, ``stepName`` and ``stepAttempt`` (an inline step runs in a flow delivery, whose
    keys have no step); in a workflow body ``runId``, and ``replaying: true`` while the body runs code it ran in
    an earlier delivery (``WorkflowRuntime.replaying``: the line was written then too). A key the line has
    already (awsworld's lines pass their own, ``extra=``) is left as it is."""
    keys = vars(record)
    step = current_step.get()
    if step is not None:
        metadata = step.metadata
        keys.setdefault("runId", metadata.run_id)
        keys.setdefault("stepId", metadata.step_id)
        keys.setdefault("stepName", metadata.step_name)
        keys.setdefault("stepAttempt", metadata.attempt)
        return True
    runtime = current_runtime.get()
    if runtime is not None:
        keys.setdefault("runId", runtime.run_id)
        if "replaying" not in keys and runtime.replaying():
            keys["replaying"] = True
    return True


logger.registered_handler.addFilter(_without_task_name)
logger.registered_handler.addFilter(_with_run_keys)
# A workflow body kept between deliveries (``KeptReplays``) reads the keys of the delivery running it now.
follow_deliveries(THREAD_LOCAL_KEYS)

# awsworld's internal loggers (awsworld.queue, awsworld.lambda, ...) write through the same JSON handler.
logging.getLogger("awsworld")
copy_config_to_registered_loggers(source_logger=logger, include={"awsworld"})

#: The class names of the handler the Lambda Python runtime puts on the root logger before it imports the handler
#: module (the awslambdaric package's ``bootstrap._setup_logging``: ``LambdaLoggerHandler``, or
#: ``LambdaLoggerHandlerWithFrameType`` with a JSON log format or a log level): ``[LEVEL] time request-id message``.
LAMBDA_RUNTIME_HANDLERS = frozenset({"LambdaLoggerHandler", "LambdaLoggerHandlerWithFrameType"})


def _for_the_root(record: logging.LogRecord) -> bool:
    """What the root's handler writes (``log_every_line_here``): not a line of awsworld's own loggers (it went
    through the JSON handler on its way up), and below WARNING only a line written by a run's code, a step's or
    a workflow's body (the user's ``log.info``): a library's INFO line outside any run (botocore's "Found
    credentials", an emulator's request lines under ``awsworld dev``) stays out, as under Lambda's runtime."""
    if record.name.partition(".")[0] in _AWSWORLD_LOGGERS:
        return False
    return record.levelno >= logging.WARNING or current_step.get() is not None or current_runtime.get() is not None


_AWSWORLD_LOGGERS = frozenset({"awsworld", logger.name})
_root_handler = logging.StreamHandler(_Stdout())  # type: ignore[arg-type]
_root_handler.setFormatter(logger.registered_formatter)  # (the same formatter object: dev renders it as text)
for _filter in (_for_the_root, _without_task_name, _with_run_keys):
    _root_handler.addFilter(_filter)


def _runtime_handler_on_root() -> bool:
    """Whether the root logger holds a Lambda runtime handler (``LAMBDA_RUNTIME_HANDLERS``): one or two handlers
    looked at, a check cheap enough for every invocation."""
    return any(type(handler).__name__ in LAMBDA_RUNTIME_HANDLERS for handler in logging.getLogger().handlers)


def log_every_line_here(level: int | str) -> None:
    """Send every logger of the process without a handler of its own (the user's ``shop.orders``, a library's)
    through awsworld's handler: the same JSON line as awsworld's, with the delivery's keys and the run's
    (``_with_run_keys``); a run's code's lines at ``level`` and above unless its logger says otherwise, other
    lines at WARNING and above (``_for_the_root``). Lambda's runtime gives the root
    logger its own text handler at WARNING: a step's ``log.info(...)`` was dropped and its warnings came out as
    text naming no run. That handler is taken off the root (each line once), and only here: the Lambda host
    and ``awsworld dev`` call this, being awsworld's own processes; ``import awsworld`` leaves a process's
    logging as it is. Calling it again changes the level only."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if type(handler).__name__ in LAMBDA_RUNTIME_HANDLERS:
            root.removeHandler(handler)
    if _root_handler not in root.handlers:
        root.addHandler(_root_handler)
    root.setLevel(level)


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
    ``log_metrics``, which clears the flag. The first invocation sends the process's other loggers through the
    same handler (``log_every_line_here``), at the level of awsworld's (``POWERTOOLS_LOG_LEVEL``, the template's
    ``LogLevel``: INFO unless set)."""
    routed: list[bool] = []

    @functools.wraps(handler)
    def invocation(event: Any, context: Any, *rest: Any) -> Any:
        # The cold start's first invocation, in the runtime's process after it set up logging; and any later one
        # that finds a runtime handler back on the root (a host that set logging up again: each line stays once).
        if not routed or _runtime_handler_on_root():
            log_every_line_here(logger.log_level)
            routed.append(True)
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
