"""The largest user value a World takes, the same on every World: ``AWSWORLD_MAX_VALUE_BYTES``.

A value (a run's input or output, a step's input or result, hook metadata or a payload, a queue payload, a
stream chunk with its 4-byte frame) is measured as the UTF-8 bytes of its compact JSON (a chunk: its bytes).
The AWS World keeps a large value in S3, so its bound is a choice, not DynamoDB's 400 KB; the in-memory World
applies the same bound, so a value a test passes is one the deployed stack takes, and a value it refuses is
refused there too, with the same ``PayloadTooLargeError``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

MAX_VALUE_BYTES_ENV = "AWSWORLD_MAX_VALUE_BYTES"
DEFAULT_MAX_VALUE_BYTES = 64 * 1024 * 1024


def max_value_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The bound this process is configured with (``AWSWORLD_MAX_VALUE_BYTES``, default 64 MiB)."""
    env = os.environ if environ is None else environ
    raw = env.get(MAX_VALUE_BYTES_ENV)
    if raw is None or raw == "":
        return DEFAULT_MAX_VALUE_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{MAX_VALUE_BYTES_ENV} must be a positive number of bytes, not {raw!r}")
    return value
