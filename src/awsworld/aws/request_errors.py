"""The SDK's failures that mean "the World is not where its configuration says" as awsworld's errors, with what to do.

A ``Client(AWSWorld())`` cut off from ``awsworld dev`` raised botocore's ``EndpointConnectionError`` (``Could not
connect to the endpoint URL``), from whichever of the World's requests came first, and a table that does not exist
raised ``ResourceNotFoundException: Requested resource not found``, naming no table: nothing said to start ``dev``,
check ``AWS_ENDPOINT_URL``, or ``AWSWORLD_TABLE`` and the region. ``clients.AWSClients`` passes every request's
failure through ``translated`` (``threaded.AsyncClient``'s ``errors``), so every call of every World user (the
``Client``, the CLI, the run viewer, the worker) raises one of two typed errors, the SDK's kept as their cause:

- ``WorldUnreachableError`` (a ``ConnectionError``): nothing answered at the address, after the SDK's retries;
- ``WorldSetupError`` (a ``RuntimeError``): no credentials, or the table, bucket or queue is not there; and, raised
  before any request (``no_region``), no region set anywhere.

Any other failure passes unchanged: the World's own code decides on the SDK's answers (a ``ClientError``'s code),
and the two errors here are raised where no such decision is made (no code of the World catches a connection or
credentials error, or a missing table, bucket or queue: ``tests/local/test_client_setup_errors.py`` has the cases).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..settings import Settings
from ..world.errors import WorldSetupError, WorldUnreachableError
from .config import AWSConfig

SERVICE_NAMES = {"dynamodb": "DynamoDB", "s3": "S3", "sqs": "SQS", "kms": "KMS", "lambda": "Lambda"}

_MISSING = {  # the codes a service answers when the resource a request names does not exist
    "dynamodb": frozenset({"ResourceNotFoundException"}),
    "s3": frozenset({"NoSuchBucket"}),
    "sqs": frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}),
}


def translated(config: AWSConfig, service: str, endpoint: str | None, region: str | None, operation: str,
               params: Mapping[str, Any], error: BaseException) -> BaseException | None:
    """The error to raise instead of ``error``, which ``operation`` (``Query``) of ``service``'s client at
    ``endpoint`` in ``region`` raised for ``params`` (which name its table, bucket or queue); None to raise
    ``error`` itself."""
    from botocore.exceptions import ClientError, ConnectionError, NoCredentialsError, PartialCredentialsError

    name = SERVICE_NAMES.get(service, service)
    if isinstance(error, ConnectionError):  # EndpointConnectionError, ConnectTimeoutError, ProxyConnectionError
        address = str(error.kwargs.get("endpoint_url") or endpoint or "its endpoint").rstrip("/")
        return WorldUnreachableError(f"cannot reach {name} at {address} ({operation})",
                                     hint=_unreachable_hint(config, region), endpoint=address, service=name,
                                     operation=operation)
    if isinstance(error, NoCredentialsError | PartialCredentialsError):
        return WorldSetupError(
            f"no AWS credentials for {name} ({operation}): {error}",
            hint="set AWS_PROFILE, or the access keys of a role the stack's ClientPolicyArn is attached to; for "
                 "`awsworld dev`, paste the export lines it prints",
            service=name, operation=operation)
    if isinstance(error, ClientError) and _code(error) in _MISSING.get(service, ()):
        return WorldSetupError(f"{_missing(config, service, params)} at {_where(endpoint, region)} ({operation}: "
                               f"{_code(error)})", hint=_setup_hint(config), service=name, operation=operation)
    return None


def no_region(service: str) -> WorldSetupError:
    """What opening ``service``'s client raises when no region is set anywhere (the config, AWS_REGION,
    AWS_DEFAULT_REGION, the AWS profile): a region awsworld picked itself (us-east-1, once) would send every request
    to another region's table, bucket and queue, and fail there as "not found"."""
    name = SERVICE_NAMES.get(service, service)
    return WorldSetupError(
        f"no AWS region is set for {name}: awsworld does not guess one (the stack's table is in one region only)",
        hint="set AWS_REGION to the stack's region (its ClientEnvironment output sets it), or give your AWS profile "
             "a region (`aws configure set region eu-west-1`, with AWS_PROFILE naming that profile), or pass "
             "AWSConfig(region_name=...) in code; for `awsworld dev`, paste the export lines it prints",
        service=name, operation="opening its client")


LOOPBACK_REFUSED_ATTEMPTS = 3
"""Attempts of a request whose connection an emulator's address on this machine refuses, before it fails: nothing
listens there (``awsworld dev`` stopped or never started; a full backlog drops a connection, it does not refuse
it), and botocore's back-off (up to 20 s a retry on botocore 1.40) made a cut-off client wait 32-46 s a call."""


def refused_on_loopback(attempts: int = 0, caught_exception: BaseException | None = None, **_: Any) -> None:
    """botocore's ``needs-retry`` handler, first on a loopback client's: stop retrying a refused connection
    after ``LOOPBACK_REFUSED_ATTEMPTS`` by raising it (``translated`` then makes it ``WorldUnreachableError``);
    anything else is left to botocore's retry handler (None)."""
    if caught_exception is None or attempts < LOOPBACK_REFUSED_ATTEMPTS:
        return
    cause: BaseException | None = caught_exception
    for _hop in range(8):  # EndpointConnectionError <- urllib3's NewConnectionError <- ConnectionRefusedError
        if cause is None:
            return
        if isinstance(cause, ConnectionRefusedError):
            raise caught_exception
        cause = cause.__cause__ or cause.__context__ or getattr(cause, "kwargs", {}).get("error")


def _code(error: Any) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _missing(config: AWSConfig, service: str, params: Mapping[str, Any]) -> str:
    """The missing resource as the request named it, with the setting it came from when it is one's: a dead-letter
    queue's URL is ``AWSWORLD_DLQ_URL``'s, not the queue's."""
    if service == "dynamodb":
        name, settings = params.get("TableName", config.table_name), {config.table_name: Settings.table.env}
        kind = "DynamoDB table"
    elif service == "s3":
        name, settings = params.get("Bucket", config.bucket_name), {config.bucket_name: Settings.bucket.env}
        kind = "S3 bucket"
    else:
        name = params.get("QueueUrl", config.queue_url)
        settings = {config.dlq_url: Settings.dlq_url.env, config.queue_url: Settings.queue_url.env}
        kind = "SQS queue"
    setting = settings.get(name)
    return f"the {kind} {name!r}{f' ({setting})' if setting else ''} does not exist"


def _where(endpoint: str | None, region: str | None) -> str:
    where = f"region {region}" if region else "its default region"
    return f"{endpoint.rstrip('/')} ({where})" if endpoint else where


def _is_local(config: AWSConfig) -> bool:
    from .sdk import is_loopback  # (imported with the first client: this runs after one failed)

    return is_loopback(config.endpoint_url) or is_loopback(config.dynamodb_endpoint_url)


def _unreachable_hint(config: AWSConfig, region: str | None) -> str:
    if _is_local(config):
        return ("is `awsworld dev` running, and AWS_ENDPOINT_URL the address its export lines give? (a `dev` "
                "restarted without --state listens on other ports, with other resource names: paste its new lines)")
    if config.endpoint_url:
        return "check AWS_ENDPOINT_URL (unset it to reach AWS itself) and this machine's network"
    return f"check this machine's network, and the region (here {region}: AWS_REGION, or your profile's)"


def _setup_hint(config: AWSConfig) -> str:
    if _is_local(config):
        return ("AWSWORLD_TABLE, AWSWORLD_BUCKET and AWSWORLD_QUEUE_URL must be the ones the running `awsworld dev` "
                "printed (one restarted without --state has new names: paste its new export lines)")
    return ("AWSWORLD_TABLE, AWSWORLD_BUCKET and AWSWORLD_QUEUE_URL must name the stack's resources (its "
            "ClientEnvironment output) and AWS_REGION, or your profile's region, its region")
