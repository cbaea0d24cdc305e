"""A step that reads a secret and a setting (docs: How-to / AWS and your services from steps): a signing key from
Secrets Manager and an endpoint from SSM Parameter Store, through Powertools' parameters utility, which the
deployed functions carry (awsworld depends on aws-lambda-powertools) and which calls AWS with the boto3 of the
process: the flow function's role when deployed, your own credentials under ``awsworld dev``."""

import asyncio
import hashlib
import hmac
import json

from aws_lambda_powertools.utilities import parameters

from awsworld import step, workflow

SIGNING_KEY = "shop/payments-signing-key"  # a secret in Secrets Manager
ENDPOINT = "/shop/payments/endpoint"  # a parameter in SSM Parameter Store


# --8<-- [start:secret]
@step(name="payments.signed_charge")
async def signed_charge(order_id: str, cents: int) -> dict[str, str]:
    # Read in the step, not at import (SnapStart would keep the value in its snapshot). Powertools caches both
    # in this execution environment for max_age seconds, across invocations: one request each per 5 minutes.
    # (to_thread: boto3 blocks, and a step blocking the event loop holds up every other step of the process.)
    key = await asyncio.to_thread(parameters.get_secret, SIGNING_KEY, max_age=300)
    url = await asyncio.to_thread(parameters.get_parameter, ENDPOINT, max_age=300)
    body = json.dumps({"order": order_id, "cents": cents})
    signature = hmac.new(str(key).encode(), body.encode(), hashlib.sha256).hexdigest()
    # A step's result is stored in the run's event log: return the signed request, never the key.
    return {"url": str(url), "body": body, "signature": signature}
# --8<-- [end:secret]


@workflow(name="payments.charge")
async def charge(order_id: str, cents: int) -> dict[str, str]:
    return await signed_charge(order_id, cents)


async def main() -> dict[str, str]:
    """On the AWS the environment names (the test suite: moto's server, through ``AWS_ENDPOINT_URL``): store the
    secret and the parameter as ``aws secretsmanager create-secret`` and ``aws ssm put-parameter`` would, run the
    workflow in memory, and remove them."""
    import boto3

    from awsworld.testing import WorkflowTestEnv

    secrets, ssm = boto3.client("secretsmanager"), boto3.client("ssm")
    secrets.create_secret(Name=SIGNING_KEY, SecretString="example-signing-key")
    ssm.put_parameter(Name=ENDPOINT, Value="https://payments.example/charges", Type="String")
    try:
        async with WorkflowTestEnv() as env:
            run = await env.client.start(charge, "A-17", 1250)
            return await run.result()
    finally:
        secrets.delete_secret(SecretId=SIGNING_KEY, ForceDeleteWithoutRecovery=True)
        ssm.delete_parameter(Name=ENDPOINT)


if __name__ == "__main__":
    asyncio.run(main())
