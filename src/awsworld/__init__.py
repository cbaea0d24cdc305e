"""awsworld: durable Python workflows on AWS serverless.

Write ``async def`` workflows and steps; start them with a ``Client``. Everything else lives in submodules:
``awsworld.world`` (the contract), ``awsworld.aws`` (the AWS World), ``awsworld.local`` (the embedded emulator),
``awsworld.testing`` (the in-memory test environment and its pytest plugin), ``awsworld.ui`` (the run viewer).
"""

from .authoring.arguments import ArgumentTypeError
from .authoring.batch import (
    BatchError,
    BatchItem,
    BatchOptionError,
    BatchResult,
    batch_map,
    first_successful,
    map,
    parallel,
)
from .authoring.calls import (
    Hook,
    create_hook,
    create_webhook,
    get_writable,
    now,
    patched,
    random,
    sleep,
    step_metadata,
    time_ns,
    uuid4,
    workflow_metadata,
)
from .authoring.children import ChildOptions, ChildRun, ChildWorkflowError, child_options, start_child
from .authoring.definitions import step, workflow
from .authoring.errors import (
    CodecError,
    DeterminismError,
    FatalError,
    HookConflictError,
    HookFailedError,
    HookHeartbeatTimeoutError,
    HookTimeoutError,
    PollAttemptsExhaustedError,
    PollTimeoutError,
    RetryableError,
    RunEndedError,
    RunNotEndedError,
    RunStartError,
    StepError,
    StepInterruptedError,
    StepTimeoutError,
    ValueTooLargeError,
    WorkflowRunCancelledError,
    WorkflowRunFailedError,
)
from .authoring.limits import Concurrency, RateLimit
from .authoring.named_calls import with_name
from .authoring.names import InvalidNameError
from .authoring.poll import poll_until
from .authoring.retry import RetryPolicy
from .client.client import Client, Run
from .durable.codecs import Codec, Place, PydanticCodec
from .schedules.declared import schedule
from .schedules.info import ScheduleInfo, schedule_info
from .schedules.model import Schedule

__version__ = "0.1.0"

__all__ = [
    "ArgumentTypeError",
    "BatchError",
    "BatchItem",
    "BatchOptionError",
    "BatchResult",
    "ChildOptions",
    "ChildRun",
    "ChildWorkflowError",
    "Client",
    "Codec",
    "CodecError",
    "Concurrency",
    "DeterminismError",
    "FatalError",
    "Hook",
    "HookConflictError",
    "HookFailedError",
    "HookHeartbeatTimeoutError",
    "HookTimeoutError",
    "InvalidNameError",
    "Place",
    "PollAttemptsExhaustedError",
    "PollTimeoutError",
    "PydanticCodec",
    "RateLimit",
    "RetryPolicy",
    "RetryableError",
    "Run",
    "RunEndedError",
    "RunNotEndedError",
    "RunStartError",
    "Schedule",
    "ScheduleInfo",
    "StepError",
    "StepInterruptedError",
    "StepTimeoutError",
    "ValueTooLargeError",
    "WorkflowRunCancelledError",
    "WorkflowRunFailedError",
    "batch_map",
    "child_options",
    "create_hook",
    "create_webhook",
    "first_successful",
    "get_writable",
    "map",
    "now",
    "parallel",
    "patched",
    "poll_until",
    "random",
    "schedule",
    "schedule_info",
    "sleep",
    "start_child",
    "step",
    "step_metadata",
    "time_ns",
    "uuid4",
    "with_name",
    "workflow",
    "workflow_metadata",
]
