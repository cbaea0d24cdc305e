"""A ``Client(AWSWorld())`` whose World is not where its settings say: every call raises awsworld's typed error
saying what to check, the SDK's own kept as its cause (``aws/request_errors.py``).

Before, a script or web app cut off from ``awsworld dev`` (stopped, never started, another port) got botocore's
``EndpointConnectionError: Could not connect to the endpoint URL``; a wrong ``AWSWORLD_TABLE`` got
``ResourceNotFoundException: Requested resource not found`` naming no table; no credentials, ``NoCredentialsError``;
and a region set only in the AWS profile was ignored for us-east-1 (``aws/clients.py``), though
docs/get-started/deploy.md says the region comes from the profile. Each case builds its World from the
environment, as a user's script does (``AWSWorld()``), and runs real requests: a closed port, the moto server."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import botocore.endpoint
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

from awsworld import Client, RunStartError, WorldSetupError, WorldUnreachableError, workflow
from awsworld.aws import AWSWorld
from awsworld.aws.request_errors import LOOPBACK_REFUSED_ATTEMPTS
from awsworld.local import LocalAWS


@workflow(name="setup_errors.noop")
async def noop() -> None:
    return None


AWS_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE",
                 "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWSWORLD_TABLE", "AWSWORLD_BUCKET",
                 "AWSWORLD_QUEUE_URL", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN")


@pytest.fixture
def user_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., None]:
    """Set the process's environment as a user's shell would (only the variables given), with no AWS files and
    no instance metadata to fall back on."""
    def set_env(**variables: str) -> None:
        for name in AWS_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
    return set_env


@pytest.fixture
async def client() -> AsyncIterator[Callable[[], Client]]:
    """``Client(AWSWorld())`` made from the environment as set when called; its World closed after the test."""
    made: list[AWSWorld] = []

    def make() -> Client:
        made.append(AWSWorld())
        return Client(made[-1])

    yield make
    for world in made:
        await world.close()


def calls(client: Client) -> dict[str, Callable[[], Awaitable[Any]]]:
    """What an application calls, one of each kind of request: a start (a Query, then writes), a run's reads, a
    listing, a cancel, a hook's resume."""
    run = client.get_run("wrun_01KSETUPERRORS0000000000")
    return {"start": lambda: client.start(noop), "status": run.status, "result": lambda: run.result(timeout=1),
            "list_runs": client.list_runs, "cancel": lambda: client.cancel(run.run_id),
            "resume_hook": lambda: client.resume_hook("approve:1", {"ok": True})}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_client_cut_off_from_dev_says_to_start_it_on_every_call(
        user_env: Callable[..., None], client: Callable[[], Client], monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing listens at the address, so a request stops after ``LOOPBACK_REFUSED_ATTEMPTS``: botocore's back-offs
    (up to 20 s a retry on botocore 1.40) made each call wait 32-46 s (measured). The back-offs are recorded here,
    not slept."""
    slept: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=slept.append))
    port = closed_port()  # nothing listens: `awsworld dev` stopped, or never started
    user_env(AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="awsworldlocal",
             AWS_SECRET_ACCESS_KEY="local", AWSWORLD_TABLE="t", AWSWORLD_BUCKET="b",
             AWSWORLD_QUEUE_URL=f"http://127.0.0.1:{port}/123456789012/q")
    cut_off = client()
    assert isinstance(cut_off.world, AWSWorld)
    for name, call in calls(cut_off).items():
        with pytest.raises(WorldUnreachableError) as raised:
            await call()
        error = raised.value
        assert isinstance(error, ConnectionError), name
        assert isinstance(error.__cause__, EndpointConnectionError), name  # the SDK's error, kept
        assert error.endpoint == f"http://127.0.0.1:{port}", name
        assert str(error).startswith(f"cannot reach DynamoDB at http://127.0.0.1:{port} ("), (name, str(error))
        assert "is `awsworld dev` running, and AWS_ENDPOINT_URL the address" in error.hint, name
    requests = cut_off.world.stats.total()
    assert 0 < len(slept) <= (LOOPBACK_REFUSED_ATTEMPTS - 1) * requests, (len(slept), requests)


async def test_no_credentials_is_a_setup_error_naming_what_to_set(
        user_env: Callable[..., None], client: Callable[[], Client], local_moto: LocalAWS) -> None:
    config = await local_moto.new_config()
    try:
        user_env(AWS_ENDPOINT_URL=str(config.endpoint_url), AWS_REGION="us-east-1",
                 AWSWORLD_TABLE=config.table_name, AWSWORLD_BUCKET=config.bucket_name,
                 AWSWORLD_QUEUE_URL=str(config.queue_url))
        for name, call in calls(client()).items():
            with pytest.raises(WorldSetupError) as raised:
                await call()
            assert isinstance(raised.value.__cause__, NoCredentialsError), name
            assert str(raised.value).startswith("no AWS credentials for DynamoDB"), (name, str(raised.value))
            assert "AWS_PROFILE" in raised.value.hint, name
    finally:
        await local_moto.drop(config)


async def test_a_table_that_is_not_there_is_named_and_the_region_comes_from_the_profile(
        user_env: Callable[..., None], client: Callable[[], Client], local_moto: LocalAWS, tmp_path: Path) -> None:
    """The stack's table lives in us-east-1 (the moto server's); the user's profile names that region."""
    config = await local_moto.new_config()
    profile = tmp_path / "aws-config"
    profile.write_text("[profile shop]\nregion = us-east-1\n\n[profile elsewhere]\nregion = eu-west-1\n")
    stack = {"AWS_ENDPOINT_URL": str(config.endpoint_url), "AWS_ACCESS_KEY_ID": "awsworldlocal",
             "AWS_SECRET_ACCESS_KEY": "local", "AWSWORLD_TABLE": config.table_name,
             "AWSWORLD_BUCKET": config.bucket_name, "AWSWORLD_QUEUE_URL": str(config.queue_url)}
    try:
        user_env(**{**stack, "AWSWORLD_TABLE": "shop-dev-tablee"}, AWS_REGION="us-east-1")
        for name, call in calls(client()).items():
            with pytest.raises(WorldSetupError) as raised:
                await call()
            assert isinstance(raised.value.__cause__, ClientError), name
            assert str(raised.value).startswith(
                f"the DynamoDB table 'shop-dev-tablee' (AWSWORLD_TABLE) does not exist at {config.endpoint_url} "
                "(region us-east-1)"), (name, str(raised.value))
            assert "AWSWORLD_TABLE, AWSWORLD_BUCKET and AWSWORLD_QUEUE_URL must be" in raised.value.hint, name

        user_env(**stack, AWS_CONFIG_FILE=str(profile), AWS_PROFILE="elsewhere")  # no AWS_REGION: the profile's
        with pytest.raises(WorldSetupError, match=r"does not exist at \S+ \(region eu-west-1\)"):
            await client().list_runs()
        user_env(**stack, AWS_CONFIG_FILE=str(profile), AWS_PROFILE="shop")  # was: us-east-1, whatever it said
        in_profile_region = client()
        run = await in_profile_region.start(noop)
        assert [r.run_id for r in (await in_profile_region.list_runs()).data] == [run.run_id]
    finally:
        await local_moto.drop(config)


async def test_no_region_anywhere_is_a_setup_error_naming_where_to_set_one_and_the_emulator_keeps_its_own(
        user_env: Callable[..., None], client: Callable[[], Client], local_moto: LocalAWS) -> None:
    """No AWS_REGION, AWS_DEFAULT_REGION or profile region: every call raises ``WorldSetupError`` saying where to
    set one, before any request (``aws/request_errors.py``, ``no_region``). Before, the World took us-east-1, and a
    user whose stack is elsewhere reached another region's table, missing there. A World whose endpoint and region
    awsworld chose itself (the emulator, ``local/``) keeps its region, whatever the environment says."""
    config = await local_moto.new_config()
    stack = {"AWS_ENDPOINT_URL": str(config.endpoint_url), "AWS_ACCESS_KEY_ID": "awsworldlocal",
             "AWS_SECRET_ACCESS_KEY": "local", "AWSWORLD_TABLE": config.table_name,
             "AWSWORLD_BUCKET": config.bucket_name, "AWSWORLD_QUEUE_URL": str(config.queue_url)}
    try:
        user_env(**stack)
        regionless = client()
        for name, call in calls(regionless).items():
            with pytest.raises(WorldSetupError) as raised:
                await call()
            assert str(raised.value).startswith("no AWS region is set for DynamoDB: awsworld does not guess one"), \
                (name, str(raised.value))
            assert "AWS_REGION" in raised.value.hint and "aws configure set region" in raised.value.hint, name
        assert regionless.world.stats.total() == 0, "refused before any request"
        emulated = AWSWorld(config)  # (the emulator's config: its region is awsworld's own)
        try:
            run = await Client(emulated).start(noop)
            assert (await emulated.runs.get(run.run_id)).run_id == run.run_id
        finally:
            await emulated.close()
    finally:
        await local_moto.drop(config)


async def test_the_client_of_a_world_over_http_raises_the_same_error_when_its_server_is_gone() -> None:
    """``HttpClient`` raised a ``WorldUnreachableError`` of its own (``client/http_world.py``: a ``WorldError``,
    neither the public class nor a ``ConnectionError``): one error for a World that does not answer, whichever."""
    from httpx import ConnectError

    from awsworld.client.http_client import HttpClient

    url = f"http://127.0.0.1:{closed_port()}"
    async with HttpClient(url) as over_http:
        for name, call in calls(over_http).items():
            with pytest.raises(WorldUnreachableError) as raised:
                await call()
            assert isinstance(raised.value, ConnectionError) and isinstance(raised.value.__cause__, ConnectError), name
            assert raised.value.endpoint == url and "awsworld serve" in raised.value.hint, name


def test_on_aws_the_errors_point_at_the_stack_and_the_region() -> None:
    """Off this machine (no emulator's address) the hints name the stack's outputs, the network and the region,
    not `awsworld dev` (``request_errors.translated`` on botocore's own errors, as a request to AWS raises them)."""
    from botocore.exceptions import EndpointConnectionError as Unreachable

    from awsworld.aws import AWSConfig
    from awsworld.aws.request_errors import translated

    config = AWSConfig(table_name="shop-prod-Table", bucket_name="b", region_name="eu-west-1")
    endpoint = "https://dynamodb.eu-west-1.amazonaws.com"
    missing = ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "Requested resource not found"}},
                          "Query")
    setup = translated(config, "dynamodb", endpoint, "eu-west-1", "Query", {"TableName": "shop-prod-Table"}, missing)
    assert isinstance(setup, WorldSetupError) and str(setup) == (
        f"the DynamoDB table 'shop-prod-Table' (AWSWORLD_TABLE) does not exist at {endpoint} (region eu-west-1) "
        "(Query: ResourceNotFoundException): AWSWORLD_TABLE, AWSWORLD_BUCKET and AWSWORLD_QUEUE_URL must name the "
        "stack's resources (its ClientEnvironment output) and AWS_REGION, or your profile's region, its region")
    far = translated(config, "dynamodb", endpoint, "eu-west-1", "Query", {},
                     Unreachable(endpoint_url=endpoint + "/"))
    assert isinstance(far, WorldUnreachableError) and str(far) == (
        f"cannot reach DynamoDB at {endpoint} (Query): check this machine's network, and the region (here "
        "eu-west-1: AWS_REGION, or your profile's)")
    other = ClientError({"Error": {"Code": "ConditionalCheckFailedException", "Message": ""}}, "PutItem")
    assert translated(config, "dynamodb", endpoint, "eu-west-1", "PutItem", {}, other) is None  # the World decides
    # A dead-letter queue that is not there is named as the request named it, from its own setting.
    dlq = "https://sqs.eu-west-1.amazonaws.com/1/shop-prod-dlq"
    gone = ClientError({"Error": {"Code": "AWS.SimpleQueueService.NonExistentQueue", "Message": ""}}, "ReceiveMessage")
    named = translated(dataclasses.replace(config, queue_url="https://sqs/q", dlq_url=dlq), "sqs", endpoint,
                       "eu-west-1", "ReceiveMessage", {"QueueUrl": dlq}, gone)
    assert isinstance(named, WorldSetupError) and str(named).startswith(
        f"the SQS queue '{dlq}' (AWSWORLD_DLQ_URL) does not exist at "), named


async def test_a_start_whose_queue_is_not_there_names_it_whole(
        user_env: Callable[..., None], client: Callable[[], Client], local_moto: LocalAWS) -> None:
    """The run is recorded, its message cannot be queued: ``RunStartError`` carried the cause cut at 200
    characters, mid-code (``(SendMessage: AWS.SimpleQueueService.N); finish the start ...``)."""
    config = await local_moto.new_config()
    wrong = f"{config.queue_url}-typo"
    try:
        user_env(AWS_ENDPOINT_URL=str(config.endpoint_url), AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="awsworldlocal",
                 AWS_SECRET_ACCESS_KEY="local", AWSWORLD_TABLE=config.table_name,
                 AWSWORLD_BUCKET=config.bucket_name, AWSWORLD_QUEUE_URL=wrong)
        with pytest.raises(RunStartError) as raised:
            await client().start(noop)
        assert isinstance(raised.value.__cause__, WorldSetupError)
        assert (f"(WorldSetupError: the SQS queue '{wrong}' (AWSWORLD_QUEUE_URL) does not exist at "
                f"{config.endpoint_url} (region us-east-1) (SendMessage: AWS.SimpleQueueService.NonExistentQueue)); "
                f"mend that first ({raised.value.__cause__.hint}), then finish the start with "
                "`awsworld start setup_errors.noop --run-id") in str(raised.value)
    finally:
        await local_moto.drop(config)
