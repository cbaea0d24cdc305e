"""SQS failures as contract errors, for both sides of the queue (``sqs_queue`` sends, ``deliveries`` consumes).

Throttling and server faults are retryable (``ThrottledError``, a 429): the caller backs off and tries again;
anything else is a ``WorldError`` naming the operation and SQS's code.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from ...world.errors import ThrottledError, WorldError

_THROTTLED = frozenset({"ThrottlingException", "RequestThrottled", "AWS.SimpleQueueService.RequestThrottled",
                        "KmsThrottled", "ServiceUnavailable", "InternalError", "InternalFailure"})


def sqs_error(error: ClientError, operation: str) -> WorldError:
    """An SQS failure as a contract error: throttling and server faults are retryable (429)."""
    code = str(error.response.get("Error", {}).get("Code", ""))
    if code in _THROTTLED or code.endswith("Throttled"):
        return ThrottledError(f"SQS {operation} was throttled ({code})")
    return WorldError(f"SQS {operation} failed ({code or 'unknown error'})", aws_code=code, operation=operation)
