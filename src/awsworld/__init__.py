"""awsworld: durable Python workflows on AWS serverless.

Write ``async def`` workflows and steps; start them with a ``Client``. Everything else lives in submodules:
``awsworld.world`` (the contract), ``awsworld.aws`` (the AWS World), ``awsworld.local`` (the embedded emulator).
"""

from .runtime.api import Hook, create_hook, create_webhook, get_writable, now, random, sleep, step_metadata
from .runtime.client import Client, Run
from .runtime.errors import (
    FatalError,
    HookConflictError,
    RetryableError,
    RunStartError,
    StepError,
    ValueTooLargeError,
    WorkflowRunCancelledError,
    WorkflowRunFailedError,
)
from .runtime.registry import step, workflow

__version__ = "0.1.0"

__all__ = [
    "Client",
    "FatalError",
    "Hook",
    "HookConflictError",
    "RetryableError",
    "Run",
    "RunStartError",
    "StepError",
    "ValueTooLargeError",
    "WorkflowRunCancelledError",
    "WorkflowRunFailedError",
    "create_hook",
    "create_webhook",
    "get_writable",
    "now",
    "random",
    "sleep",
    "step",
    "step_metadata",
    "workflow",
]
