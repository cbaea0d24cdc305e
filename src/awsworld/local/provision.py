"""Create the table, bucket, queue and dead-letter queue that ``template.yaml`` creates, on an emulator.

Everything comes from ``awsworld.aws.resources``, the same definitions the SAM template is checked against,
so a local World runs on the same keys, indexes, TTL, encryption and redrive settings as a deployed one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

from botocore.exceptions import ClientError

from ..aws import resources
from ..aws.clients import AWSClients
from ..aws.config import AWSConfig

log = logging.getLogger("awsworld.local.provision")

# The CreateTable parameters among the table's CloudFormation properties (same names and shapes, except
# SSESpecification); TTL and PITR take their own calls. Both emulators keep and enforce deletion protection (moto
# and DynamoDB Local refuse DeleteTable while it is on), off by default as on a deployed table.
_CREATE_TABLE_KEYS = ("BillingMode", "AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes",
                      "DeletionProtectionEnabled")


def create_table_parameters(table_name: str) -> dict[str, Any]:
    properties = resources.table_properties()
    parameters: dict[str, Any] = {"TableName": table_name, **{k: properties[k] for k in _CREATE_TABLE_KEYS}}
    sse = dict(properties.get("SSESpecification") or {})
    if sse:
        # CloudFormation says SSEEnabled where the API says Enabled; SSEType and KMSMasterKeyId match.
        sse["Enabled"] = sse.pop("SSEEnabled")
        parameters["SSESpecification"] = sse
    return parameters


async def provision_table(dynamodb: Any, table_name: str) -> None:
    properties = resources.table_properties()
    await dynamodb.create_table(**create_table_parameters(table_name))
    for _ in range(600):  # emulators create tables at once; allow a slow one a minute
        description = (await dynamodb.describe_table(TableName=table_name))["Table"]
        if description["TableStatus"] == "ACTIVE" and all(
            index.get("IndexStatus", "ACTIVE") == "ACTIVE" for index in description.get("GlobalSecondaryIndexes", [])
        ):
            break
        await asyncio.sleep(0.1)
    else:
        raise TimeoutError(f"table {table_name} did not become ACTIVE")
    ttl = properties["TimeToLiveSpecification"]
    await dynamodb.update_time_to_live(TableName=table_name, TimeToLiveSpecification=ttl)
    try:
        await dynamodb.update_continuous_backups(
            TableName=table_name,
            PointInTimeRecoverySpecification=properties["PointInTimeRecoverySpecification"],
        )
    except ClientError as error:
        # Point-in-time recovery is a backup setting with no effect on behaviour; DynamoDB Local does not
        # implement the operation. A real deployment gets it from template.yaml.
        log.debug("point-in-time recovery not enabled on %s: %s", table_name, error)


async def delete_table(dynamodb: Any, table_name: str) -> None:
    """Delete a table ``provision_table`` made, on purpose: its deletion protection off first when it is on
    (DeleteTable is refused while it is), as docs/operate/deploy.md says for a deployed one."""
    described = await dynamodb.describe_table(TableName=table_name)
    if described["Table"].get("DeletionProtectionEnabled"):
        await dynamodb.update_table(TableName=table_name, DeletionProtectionEnabled=False)
    await dynamodb.delete_table(TableName=table_name)


async def provision_bucket(s3: Any, bucket_name: str, region: str) -> None:
    if region == "us-east-1":
        await s3.create_bucket(Bucket=bucket_name)
    else:
        await s3.create_bucket(Bucket=bucket_name, CreateBucketConfiguration={"LocationConstraint": region})
    # CloudFormation's BucketEncryption {"ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault":
    # ...}]} is the API's {"Rules": [{"ApplyServerSideEncryptionByDefault": ...}]}.
    rules = [
        {("ApplyServerSideEncryptionByDefault" if key == "ServerSideEncryptionByDefault" else key): value
         for key, value in rule.items()}
        for rule in resources.bucket_encryption()["ServerSideEncryptionConfiguration"]
    ]
    await s3.put_bucket_encryption(Bucket=bucket_name, ServerSideEncryptionConfiguration={"Rules": rules})
    await s3.put_public_access_block(
        Bucket=bucket_name, PublicAccessBlockConfiguration=resources.bucket_public_access_block()
    )
    # moto expires nothing, but the rules are there to read back: the bucket is the template's.
    lifecycle = [lifecycle_rule(rule) for rule in resources.bucket_lifecycle_rules()]
    await s3.put_bucket_lifecycle_configuration(Bucket=bucket_name, LifecycleConfiguration={"Rules": lifecycle})


def lifecycle_rule(rule: dict[str, Any]) -> dict[str, Any]:
    """A lifecycle rule in CloudFormation's spelling (``resources.bucket_lifecycle_rules``) as the S3 API takes it:
    ``Prefix`` and ``TagFilters`` become one ``Filter`` (an ``And`` of both), ``ExpirationInDays`` an
    ``Expiration``."""
    tags = [{"Key": t["Key"], "Value": t["Value"]} for t in rule.get("TagFilters", [])]
    prefix = rule.get("Prefix", "")
    api: dict[str, Any] = {"ID": rule["Id"], "Status": rule["Status"],
                           "Filter": {"And": {"Prefix": prefix, "Tags": tags}} if tags else {"Prefix": prefix}}
    if "ExpirationInDays" in rule:
        api["Expiration"] = {"Days": rule["ExpirationInDays"]}
    if "AbortIncompleteMultipartUpload" in rule:
        api["AbortIncompleteMultipartUpload"] = rule["AbortIncompleteMultipartUpload"]
    return api


async def provision_queues(sqs: Any, queue_name: str) -> tuple[str, str]:
    """Create the dead-letter queue and the flow queue (redriving into it); return (queue_url, dlq_url)."""
    dlq_url = (await sqs.create_queue(QueueName=f"{queue_name}-dlq", Attributes=resources.dlq_attributes()))[
        "QueueUrl"
    ]
    dlq_arn = (await sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"]))["Attributes"][
        "QueueArn"
    ]
    queue_url = (
        await sqs.create_queue(QueueName=queue_name, Attributes=resources.queue_attributes(dlq_arn))
    )["QueueUrl"]
    return queue_url, dlq_url


class Provisioner:
    """Open clients for one set of endpoints, kept for many ``provision`` calls (creating botocore clients
    costs far more than the calls themselves). An async context manager."""

    def __init__(self, config: AWSConfig) -> None:
        self.config = config
        self._aws: AWSClients | None = None
        self._clients: tuple[Any, Any, Any] | None = None

    async def __aenter__(self) -> Provisioner:
        # The World's own client plumbing (same endpoints, credentials and options), uncounted by any World.
        self._aws = AWSClients(self.config)
        self._clients = (await self._aws.dynamodb(), await self._aws.s3(), await self._aws.sqs())
        return self

    async def __aexit__(self, *exc: object) -> None:
        aws, self._aws, self._clients = self._aws, None, None
        if aws is not None:
            await aws.close()

    def _open(self) -> tuple[Any, Any, Any]:
        if self._clients is None:
            raise RuntimeError("enter `async with Provisioner(config)` first")
        return self._clients

    async def _kms_client(self) -> Any:
        self._open()
        assert self._aws is not None
        return await self._aws.kms()

    async def payload_key(self) -> str:
        """A new KMS key on the emulator for per-run payload encryption (``AWSConfig.kms_key_id``)."""
        kms = await self._kms_client()
        made = await kms.create_key(Description="awsworld payload encryption (local)", KeyUsage="ENCRYPT_DECRYPT")
        return made["KeyMetadata"]["Arn"]

    async def provision(self, config: AWSConfig, *, queue_name: str | None = None,
                        encrypt_payloads: bool = False) -> AWSConfig:
        """Create ``config.table_name``, ``config.bucket_name`` and a queue (default name: the table's) with
        its DLQ, and with ``encrypt_payloads`` a KMS key; return ``config`` with every field filled.
        ``config`` must use this provisioner's endpoints."""
        dynamodb, s3, sqs = self._open()
        region = config.region_name or "us-east-1"
        try:
            async with asyncio.TaskGroup() as group:  # a failure cancels the others before the clients close
                group.create_task(provision_table(dynamodb, config.table_name))
                group.create_task(provision_bucket(s3, config.bucket_name, region))
                queues = group.create_task(provision_queues(sqs, queue_name or config.table_name))
        except ExceptionGroup as errors:
            raise errors.exceptions[0] from errors
        queue_url, dlq_url = queues.result()
        return dataclasses.replace(
            config,
            kms_key_id=await self.payload_key() if encrypt_payloads else config.kms_key_id,
            region_name=region,
            queue_url=queue_url,
            dlq_url=dlq_url,
            dynamodb_endpoint_url=config.dynamodb_endpoint_url or config.endpoint_url,
        )

    async def deprovision(self, config: AWSConfig) -> None:
        """Delete what ``provision`` created (best effort: tests call it to keep long sessions small)."""
        dynamodb, s3, sqs = self._open()

        async def empty_and_delete_bucket() -> None:
            paginator = s3.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=config.bucket_name):
                keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
                if keys:
                    await s3.delete_objects(Bucket=config.bucket_name, Delete={"Objects": keys, "Quiet": True})
            await s3.delete_bucket(Bucket=config.bucket_name)

        jobs = [delete_table(dynamodb, config.table_name), empty_and_delete_bucket()]
        jobs += [sqs.delete_queue(QueueUrl=url) for url in (config.queue_url, config.dlq_url) if url]
        for result in await asyncio.gather(*jobs, return_exceptions=True):
            if isinstance(result, Exception):
                log.debug("deprovision %s: %s", config.table_name, result)


async def provision(config: AWSConfig, *, queue_name: str | None = None) -> AWSConfig:
    """Create the table, bucket, queue and DLQ ``config`` names, on ``config``'s endpoints with its client
    options; return ``config`` with ``queue_url``, ``dlq_url`` and both endpoints filled."""
    async with Provisioner(config) as provisioner:
        return await provisioner.provision(config, queue_name=queue_name)


async def deprovision(config: AWSConfig) -> None:
    async with Provisioner(config) as provisioner:
        await provisioner.deprovision(config)
