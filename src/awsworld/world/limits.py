"""The largest user value a World takes, the same on every World: ``AWSWORLD_MAX_VALUE_BYTES``.

A value (a run's input or output, a step's input or result, hook metadata or a payload, a queue payload, a
stream chunk with its 4-byte frame) is measured as the UTF-8 bytes of its compact JSON (a chunk: its bytes).
The AWS World keeps a large value in S3, so its bound is a choice, not DynamoDB's 400 KB; the in-memory World
applies the same bound, so a value a test passes is one the deployed stack takes, and a value it refuses is
refused there too, with the same ``PayloadTooLargeError``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..settings import DEFAULT_MAX_VALUE_BYTES as DEFAULT_MAX_VALUE_BYTES  # re-exported
from ..settings import SETTINGS, Settings

MAX_VALUE_BYTES_ENV = Settings.max_value_bytes.env


def max_value_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The bound this process is configured with (``AWSWORLD_MAX_VALUE_BYTES``, default 64 MiB; ``ValueError``
    for a value that is not a positive number of bytes)."""
    return (SETTINGS if environ is None else Settings(environ)).max_value_bytes
