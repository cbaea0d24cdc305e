"""awsworld: durable Python workflows on AWS serverless.

Write ``async def`` workflows and steps; start them with a ``Client``. Everything else lives in submodules:
``awsworld.world`` (the contract), ``awsworld.aws`` (the AWS World), ``awsworld.local`` (the embedded emulator),
``awsworld.testing`` (the in-memory test environment and its pytest plugin), ``awsworld.ui`` (the run viewer).

The names below are imported when first used (PEP 562's module ``__getattr__``): ``import awsworld`` alone, which
every ``awsworld`` command and every submodule's import runs, loads none of them, so ``awsworld --help`` does not pay
for the authoring layer, pydantic and the client. ``from awsworld import step`` and ``awsworld.step`` read the same
objects as before; type checkers and IDEs read the ``TYPE_CHECKING`` imports, which name every one of them
(``tests/test_public_api.py`` holds the imports, ``_PUBLIC`` and ``__all__`` to one list).
"""

TYPE_CHECKING = False
"""(``typing.TYPE_CHECKING``'s value, which type checkers read as True by its name: importing ``typing`` here, the
first import of every ``awsworld`` command, made its first 30 ms, before the command's code could answer a Ctrl-C
with ``stopped``, a traceback's: tests/cli/test_dev_ctrl_c_start.py)"""

__version__ = "0.1.0"

_PUBLIC: dict[str, tuple[str, ...]] = {
    "_deployments.pins": ("DeploymentUnavailableError",),
    "authoring.arguments": ("ArgumentTypeError",),
    "authoring.batch": (
        "BatchError", "BatchItem", "BatchOptionError", "BatchResult", "batch_map", "first_successful", "map",
        "parallel",
    ),
    "authoring.calls": (
        "Hook", "create_hook", "create_webhook", "get_writable", "now", "patched", "random", "sleep", "step_metadata",
        "time_ns", "uuid4", "webhook_url", "workflow_metadata",
    ),
    "authoring.children": ("ChildOptions", "ChildRun", "ChildWorkflowError", "child_options", "start_child"),
    "authoring.definitions": ("Workflow", "WorkflowNotRegisteredError", "step", "workflow"),
    "authoring.errors": (
        "CallNotAwaitedError", "ChildDepthError", "CodecError", "DeterminismError", "FatalError", "HookConflictError",
        "HookFailedError", "HookHeartbeatTimeoutError", "HookTimeoutError", "PollAttemptsExhaustedError",
        "PollTimeoutError", "RetryableError", "RunEndedError", "RunLifetimeError", "RunNotEndedError",
        "RunStartError", "StepError", "StepInterruptedError", "StepTimeoutError", "ValueTooLargeError",
        "WorkflowRunCancelledError", "WorkflowRunFailedError",
    ),
    "authoring.limits": ("Concurrency", "RateLimit"),
    "authoring.named_calls": ("with_name",),
    "authoring.names": ("InvalidNameError",),
    "authoring.poll": ("poll_until",),
    "authoring.resume": ("resume_hook",),
    "authoring.retry": ("RetryPolicy",),
    "authoring.runtime": ("WorkflowMetadata",),
    "authoring.step_context": ("StepMetadata", "StreamWriter"),
    "authoring.webhook_requests": ("WebhookRequest",),
    "authoring.webhook_responses": ("InvalidWebhookResponseError", "WebhookResponse", "respond"),
    "client.client": ("Client", "Run"),
    "durable.codecs": ("Codec", "Place", "PydanticCodec"),
    "schedules.declared": ("schedule",),
    "schedules.info": ("ScheduleInfo", "schedule_info"),
    "schedules.model": ("Schedule",),
    "world.errors": ("RunIdTakenError", "WorldSetupError", "WorldUnreachableError"),
}
"""Each public name by the submodule that defines it (relative to ``awsworld``), as the imports below name them."""

if TYPE_CHECKING:
    from ._deployments.pins import DeploymentUnavailableError
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
        webhook_url,
        workflow_metadata,
    )
    from .authoring.children import ChildOptions, ChildRun, ChildWorkflowError, child_options, start_child
    from .authoring.definitions import Workflow, WorkflowNotRegisteredError, step, workflow
    from .authoring.errors import (
        CallNotAwaitedError,
        ChildDepthError,
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
        RunLifetimeError,
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
    from .authoring.resume import resume_hook
    from .authoring.retry import RetryPolicy
    from .authoring.runtime import WorkflowMetadata
    from .authoring.step_context import StepMetadata, StreamWriter
    from .authoring.webhook_requests import WebhookRequest
    from .authoring.webhook_responses import InvalidWebhookResponseError, WebhookResponse, respond
    from .client.client import Client, Run
    from .durable.codecs import Codec, Place, PydanticCodec
    from .schedules.declared import schedule
    from .schedules.info import ScheduleInfo, schedule_info
    from .schedules.model import Schedule
    from .world.errors import RunIdTakenError, WorldSetupError, WorldUnreachableError
else:
    _MODULE_OF = {name: module for module, names in _PUBLIC.items() for name in names}

    def __getattr__(name: str) -> object:
        """A public name, imported from its submodule on first use and kept here (the next read is a plain one)."""
        module = _MODULE_OF.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_MODULE_OF})

__all__ = [
    "ArgumentTypeError",
    "BatchError",
    "BatchItem",
    "BatchOptionError",
    "BatchResult",
    "CallNotAwaitedError",
    "ChildDepthError",
    "ChildOptions",
    "ChildRun",
    "ChildWorkflowError",
    "Client",
    "Codec",
    "CodecError",
    "Concurrency",
    "DeploymentUnavailableError",
    "DeterminismError",
    "FatalError",
    "Hook",
    "HookConflictError",
    "HookFailedError",
    "HookHeartbeatTimeoutError",
    "HookTimeoutError",
    "InvalidNameError",
    "InvalidWebhookResponseError",
    "Place",
    "PollAttemptsExhaustedError",
    "PollTimeoutError",
    "PydanticCodec",
    "RateLimit",
    "RetryPolicy",
    "RetryableError",
    "Run",
    "RunEndedError",
    "RunIdTakenError",
    "RunLifetimeError",
    "RunNotEndedError",
    "RunStartError",
    "Schedule",
    "ScheduleInfo",
    "StepError",
    "StepInterruptedError",
    "StepMetadata",
    "StepTimeoutError",
    "StreamWriter",
    "ValueTooLargeError",
    "WebhookRequest",
    "WebhookResponse",
    "Workflow",
    "WorkflowMetadata",
    "WorkflowNotRegisteredError",
    "WorkflowRunCancelledError",
    "WorkflowRunFailedError",
    "WorldSetupError",
    "WorldUnreachableError",
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
    "respond",
    "resume_hook",
    "schedule",
    "schedule_info",
    "sleep",
    "start_child",
    "step",
    "step_metadata",
    "time_ns",
    "uuid4",
    "webhook_url",
    "with_name",
    "workflow",
    "workflow_metadata",
]
