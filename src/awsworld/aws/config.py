"""Where the AWS World's resources are: read from the environment the SAM template sets, or given."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..settings import DEFAULT_INLINE_VALUE_LIMIT as DEFAULT_INLINE_VALUE_LIMIT  # re-exported
from ..settings import DEFAULT_MAX_RUN_DAYS as DEFAULT_MAX_RUN_DAYS
from ..settings import DEFAULT_MAX_VALUE_BYTES as DEFAULT_MAX_VALUE_BYTES
from ..settings import DEFAULT_RETENTION_DAYS as DEFAULT_RETENTION_DAYS
from ..settings import SETTINGS, Settings

_DAY = 24 * 3600
DEFAULT_RETENTION_SECONDS = DEFAULT_RETENTION_DAYS * _DAY
DEFAULT_MAX_RUN_SECONDS = DEFAULT_MAX_RUN_DAYS * _DAY


@dataclass(frozen=True)
class AWSConfig:
    table_name: str
    bucket_name: str
    queue_url: str | None = None
    dlq_url: str | None = None
    region_name: str | None = None
    endpoint_url: str | None = None
    # DynamoDB may live elsewhere than S3/SQS (DynamoDB Local beside moto's server).
    dynamodb_endpoint_url: str | None = None
    deployment_id: str | None = None
    # Values above this many bytes (encoded) go to S3 instead of into the DynamoDB item.
    inline_value_limit: int = DEFAULT_INLINE_VALUE_LIMIT
    # The largest value (run input/output, step input/result, hook payload) accepted at all.
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    # How long a finished run stays readable unless its workflow says (``@workflow(retention=...)``), and the
    # longest a run may stay running: the TTL rule of ``aws/retention.py``. A client writes a run's first
    # items, so it needs the stack's values too (the ClientEnvironment output carries them).
    retention_seconds: int = DEFAULT_RETENTION_SECONDS
    max_run_seconds: int = DEFAULT_MAX_RUN_SECONDS
    # Per-run payload encryption (``aws/encryption``): the KMS key new runs' data keys are made under. None
    # stores new runs in plain text; runs already encrypted stay readable either way.
    kms_key_id: str | None = None
    client_options: dict[str, object] = field(default_factory=dict)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AWSConfig:
        """The stack's resources and limits from ``environ`` (default: this process's environment): the
        ``AWSWORLD_*`` variables through ``Settings``, the SDK's own (``AWS_REGION``, ``AWS_ENDPOINT_URL``...)
        as the SDK names them."""
        env = os.environ if environ is None else environ
        settings = SETTINGS if environ is None else Settings(environ)
        table, bucket = settings.table, settings.bucket
        if table is None or bucket is None:
            missing = Settings.table if table is None else Settings.bucket
            raise RuntimeError(
                f"{missing.env} is not set: point awsworld at its DynamoDB table and S3 bucket "
                "(the SAM template sets AWSWORLD_TABLE, AWSWORLD_BUCKET and AWSWORLD_QUEUE_URL)")
        return cls(
            table_name=table,
            bucket_name=bucket,
            queue_url=settings.queue_url,
            dlq_url=settings.dlq_url,
            region_name=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
            endpoint_url=env.get("AWS_ENDPOINT_URL"),
            dynamodb_endpoint_url=env.get("AWS_ENDPOINT_URL_DYNAMODB"),
            deployment_id=settings.deployment_id,
            **value_limits(environ),
            **ttl_limits(environ),
            kms_key_id=settings.kms_key_id,  # the template sets it empty when off
        )


def value_limits(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``inline_value_limit`` and ``max_value_bytes`` as the environment sets them (``AWSWORLD_INLINE_VALUE_LIMIT``,
    ``AWSWORLD_MAX_VALUE_BYTES``): the deployed functions read them in ``from_env``, the local emulator too."""
    settings = SETTINGS if environ is None else Settings(environ)
    return {"inline_value_limit": settings.inline_value_limit, "max_value_bytes": settings.max_value_bytes}


def ttl_limits(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``retention_seconds`` and ``max_run_seconds`` as the environment sets them (``AWSWORLD_RETENTION_DAYS``,
    ``AWSWORLD_MAX_RUN_DAYS``): the deployed functions read them in ``from_env``, the local emulator too, so its
    items' TTLs (``aws/retention.py``) follow the same limit the engine holds a run to
    (``world/rules/lifetime.py``)."""
    settings = SETTINGS if environ is None else Settings(environ)
    return {"retention_seconds": round(settings.retention_days * _DAY),
            "max_run_seconds": round(settings.max_run_days * _DAY)}
