"""Under ``awsworld dev`` a step's own AWS calls use the developer's environment (credentials, region, endpoint),
not dev's emulator: ``dev`` gives its emulator's endpoint and dummy keys to awsworld's own clients only
(``awsworld.local``) and leaves the process's AWS settings alone (``cli/dev.py``), as
docs/how-to/aws-from-steps.md says. ``dev`` as a process, whose environment names "your account": the session's
moto server, where a secret exists that dev's own emulator (a moto of its own, in dev's process) does not hold."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest

from awsworld.local import REGION, MotoServer

from .test_cli import Dev, Runner, _start, project_of

SECRET = "clitest/payments-signing-key"
YOUR_REGION = "eu-west-1"  # not dev's emulator's (awsworld.local.REGION)

WORKFLOWS = f'''
import boto3

from awsworld import step, workflow


@step(name="clitest.read_secret")
async def read_secret() -> dict:
    client = boto3.client("secretsmanager")  # configured by the process's environment alone
    value = client.get_secret_value(SecretId="{SECRET}")["SecretString"]
    return {{"value": value, "region": client.meta.region_name}}


@workflow(name="clitest.secret")
async def secret() -> dict:
    return await read_secret()
'''


@pytest.fixture(scope="module")
def your_account(moto_server: MotoServer) -> dict[str, str]:
    """The developer's AWS environment: the session's moto server, holding the secret, in a region of its own."""
    environment = {"AWS_ENDPOINT_URL": moto_server.endpoint_url, "AWS_ACCESS_KEY_ID": "developer",
                   "AWS_SECRET_ACCESS_KEY": "developer", "AWS_DEFAULT_REGION": YOUR_REGION}
    client = boto3.client("secretsmanager", endpoint_url=moto_server.endpoint_url, region_name=YOUR_REGION,
                          aws_access_key_id="developer", aws_secret_access_key="developer")
    client.create_secret(Name=SECRET, SecretString="the developer's key")
    return environment


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, your_account: dict[str, str]) -> Iterator[Dev]:
    project = project_of(tmp_path_factory, "step-credentials", WORKFLOWS)
    runner = Runner(tmp_path_factory.mktemp("step-credentials-runner"))
    server = Dev(project, project / "state", [runner], settings=your_account)
    yield server
    server.stop()
    runner.close()


def test_a_steps_boto3_under_dev_uses_the_developers_environment_not_devs_emulator(
        dev: Dev, your_account: dict[str, str]) -> None:
    assert REGION != YOUR_REGION
    assert dev.env["AWS_ENDPOINT_URL"] != your_account["AWS_ENDPOINT_URL"], "dev's emulator is a server of its own"
    run_id = _start(dev, "clitest.secret")
    result = dev("result", run_id, "--wait", "60")
    assert result.code == 0, result
    assert json.loads(result.out) == {"value": "the developer's key", "region": YOUR_REGION}
