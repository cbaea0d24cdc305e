"""The AWS resources awsworld needs, defined once.

``LocalAWS`` provisions from these definitions and ``template.yaml`` is checked against them, so the embedded
emulator and a real deployment never drift apart. The dicts use CloudFormation property names, which are also
the boto3 ``create_*`` parameter names where the two APIs overlap.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..world.queue import (
    QUEUE_MAX_RECEIVE_COUNT,
    QUEUE_RETENTION_SECONDS,
    queue_visibility_timeout_seconds,
)

PK = "pk"
SK = "sk"
TTL_ATTRIBUTE = "expiresAt"

GSI_BY_WORKFLOW = "byWorkflow"
GSI_BY_STATUS = "byStatus"
GSI_WORKFLOW_KEY = "gsiWorkflow"
GSI_STATUS_KEY = "gsiStatus"
GSI_RUN_KEY = "gsiRunId"
# The watchdog's index (``world.watch``): sparse, only unfinished runs carry its keys; see ``table_properties``.
GSI_BY_DUE = "byDue"
GSI_DUE_SHARD = "wdShard"
GSI_DUE_KEY = "wdDue"
WATCH_WAKES = "wdN"
# The run head's end of its lifetime as a due key (``world/rules/lifetime.py``): the watchdog's snooze stops there.
WATCH_END = "wdEnd"

# SQS: standard queue. Visibility must exceed the flow function's timeout several times over so a
# delivery still running is not handed to a second consumer (AWS recommends 6x for event source mappings).
# (The flow function's timeout, the queue's visibility timeout, receive count and retention are every World's:
# ``world/queue.py``.)
DLQ_RETENTION_SECONDS = 14 * 24 * 3600
MAX_SQS_DELAY_SECONDS = 900

_RUN_INDEX_PROJECTION = {"ProjectionType": "INCLUDE", "NonKeyAttributes": [GSI_STATUS_KEY, GSI_WORKFLOW_KEY]}
_DUE_INDEX_PROJECTION = {"ProjectionType": "INCLUDE", "NonKeyAttributes": [GSI_WORKFLOW_KEY, WATCH_WAKES]}


def table_properties() -> dict[str, Any]:
    """One table for runs, events, entities, tokens, dedup markers and stream indexes.

    The two listing GSIs exist only for cross-run listings. Their keys live on the run item and change only on
    status transitions, and they project nothing but the filter keys, so the per-event updates of the run
    item (``seq``, ``updatedAt``) never write to them.

    ``byDue`` is the watchdog's (``world.watch``): sparse (a finished run drops its keys and leaves it), keyed by
    a shard and the run's due rounded to a minute, so a busy run's writes change its key at most once a minute;
    it projects the workflow name (which never changes: free) and the watchdog's wake count (which changes only
    with the due), so no other write of the run item reaches it.
    """
    return {
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": PK, "AttributeType": "S"},
            {"AttributeName": SK, "AttributeType": "S"},
            {"AttributeName": GSI_WORKFLOW_KEY, "AttributeType": "S"},
            {"AttributeName": GSI_STATUS_KEY, "AttributeType": "S"},
            {"AttributeName": GSI_RUN_KEY, "AttributeType": "S"},
            {"AttributeName": GSI_DUE_SHARD, "AttributeType": "S"},
            {"AttributeName": GSI_DUE_KEY, "AttributeType": "S"},
        ],
        "KeySchema": [
            {"AttributeName": PK, "KeyType": "HASH"},
            {"AttributeName": SK, "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": GSI_BY_WORKFLOW,
                "KeySchema": [
                    {"AttributeName": GSI_WORKFLOW_KEY, "KeyType": "HASH"},
                    {"AttributeName": GSI_RUN_KEY, "KeyType": "RANGE"},
                ],
                "Projection": _RUN_INDEX_PROJECTION,
            },
            {
                "IndexName": GSI_BY_STATUS,
                "KeySchema": [
                    {"AttributeName": GSI_STATUS_KEY, "KeyType": "HASH"},
                    {"AttributeName": GSI_RUN_KEY, "KeyType": "RANGE"},
                ],
                "Projection": _RUN_INDEX_PROJECTION,
            },
            {
                "IndexName": GSI_BY_DUE,
                "KeySchema": [
                    {"AttributeName": GSI_DUE_SHARD, "KeyType": "HASH"},
                    {"AttributeName": GSI_DUE_KEY, "KeyType": "RANGE"},
                ],
                "Projection": _DUE_INDEX_PROJECTION,
            },
        ],
        "SSESpecification": {"SSEEnabled": True},
        "TimeToLiveSpecification": {"AttributeName": TTL_ATTRIBUTE, "Enabled": True},
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        # Off, as the template's TableDeletionProtection is by default: while on, no DeleteTable goes through, a
        # failed first deploy's rollback included (docs/operate/deploy.md); local/provision.py's delete_table
        # turns it off first when a user turned it on.
        "DeletionProtectionEnabled": False,
    }


def queue_attributes(dlq_arn: str | None) -> dict[str, str]:
    """SQS attributes (string-valued, as both CreateQueue and CloudFormation take them). The visibility timeout
    follows ``AWSWORLD_FLOW_TIMEOUT_SECONDS`` as the template's FlowTimeouts mapping does (six times it)."""
    attrs = {
        "VisibilityTimeout": str(queue_visibility_timeout_seconds()),
        "MessageRetentionPeriod": str(QUEUE_RETENTION_SECONDS),
        "SqsManagedSseEnabled": "true",
    }
    if dlq_arn:
        redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": QUEUE_MAX_RECEIVE_COUNT}
        attrs["RedrivePolicy"] = json.dumps(redrive)
    return attrs


def dlq_attributes() -> dict[str, str]:
    return {"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS), "SqsManagedSseEnabled": "true"}


def bucket_encryption() -> dict[str, Any]:
    return {"ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}


def bucket_public_access_block() -> dict[str, bool]:
    return {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }


RUNS_PREFIX = "runs/"
QUEUE_PREFIX = "queue/"


def run_prefix(run_id: str) -> str:
    """Every S3 object of a run lives under this prefix, so lifecycle and retention work per run."""
    return f"{RUNS_PREFIX}{run_id}/"


# S3 expiry classes. A run's DynamoDB items live ``R + H`` after they are written (``aws/retention.py``), with
# ``R`` per workflow, so one lifecycle rule (``ExpirationInDays: RunRetentionDays``) would cut the S3 values and
# stream chunks of a run that sleeps past it, or whose workflow keeps runs longer, while DynamoDB still points at
# them. CloudFormation cannot add two parameters and a rule cannot read a number off an object, so each object is
# tagged with an expiry class (the shortest of these day counts that covers its run's ``R + H``) and the bucket
# has one rule per class. Each class is at most 1.25 times the day after the one before, so an object lives at
# most 25% longer than its run needs (beyond rounding up to whole days), in about thirty rules from one day to
# over ten years (S3 allows 1,000 per bucket). The tag key does not start with ``aws``: S3 reserves only
# ``aws:``, but moto refuses every key starting with ``aws``, and the emulator must take what AWS takes.
EXPIRY_TAG = "expiry-days"
EXPIRY_RATIO = 1.25
LONGEST_EXPIRY_DAYS = 3653  # ten years: the last class is the first at least this long


def _expiry_classes() -> tuple[int, ...]:
    classes = [1]
    while classes[-1] < LONGEST_EXPIRY_DAYS:
        classes.append(math.floor(EXPIRY_RATIO * (classes[-1] + 1)))
    return tuple(classes)


EXPIRY_CLASSES_DAYS = _expiry_classes()
# Payloads of queue messages that name no run: kept past the queue's 4 days plus the DLQ's 14.
QUEUE_PAYLOAD_EXPIRY_DAYS = 19


def bucket_lifecycle_rules() -> list[dict[str, Any]]:
    """The bucket's lifecycle rules (CloudFormation's spelling; ``local/provision.py`` translates them).

    One rule per expiry class for the tagged objects under ``runs/``, and one for every object under ``runs/``
    at the longest class: objects written before the tags (which expired after ``RunRetentionDays``) and any
    without one. Where two expiration rules match an object S3 applies the shorter, so that rule never cuts a
    tagged object short.
    """
    tagged = [{"Id": f"expire-runs-{days}d", "Status": "Enabled", "Prefix": RUNS_PREFIX,
               "TagFilters": [{"Key": EXPIRY_TAG, "Value": str(days)}], "ExpirationInDays": days}
              for days in EXPIRY_CLASSES_DAYS]
    return [
        *tagged,
        {"Id": "expire-runs-untagged", "Status": "Enabled", "Prefix": RUNS_PREFIX,
         "ExpirationInDays": EXPIRY_CLASSES_DAYS[-1]},
        {"Id": "expire-queue-payloads", "Status": "Enabled", "Prefix": QUEUE_PREFIX,
         "ExpirationInDays": QUEUE_PAYLOAD_EXPIRY_DAYS},
        {"Id": "abort-incomplete-uploads", "Status": "Enabled",
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
    ]
