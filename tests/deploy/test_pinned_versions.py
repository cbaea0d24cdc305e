"""Published versions of the flow function, modelled on the emulator (moto's Lambda does not run functions here):
``awsworld.local.lambda_versions.FunctionVersions`` (execution environments running the real
``awsworld.lambda_host.flow`` code; Lambda's asynchronous ``Invoke`` of a qualified version as a hand-over
event passed through JSON to ``flow.handle_hand_over`` in a thread of its own), and an event source mapping
stand-in that invokes the ``live`` version with batches of the queue. Everything but the one ``invoke`` call of
``lambda_host.versions.LambdaHost`` is the code a deployed function runs.

What it shows: a run started on version 1 keeps running version 1's code after version 2 takes the alias, while a
run started then runs version 2's; a deleted version's run fails with ``DeploymentMismatchError`` after three
re-routes; and what a re-routed delivery costs the live version in requests (printed; README "Runs stay on the
code that started them")."""

from __future__ import annotations

import asyncio
import io
import os
import secrets
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from awsworld import WorkflowRunFailedError
from awsworld._deployments.pins import DEPLOYMENT_MISMATCH, PIN_ATTRIBUTE
from awsworld._deployments.upgrade import upgrade_run
from awsworld.aws import AWSWorld
from awsworld.aws.clients import RequestStats
from awsworld.client.client import Client
from awsworld.lambda_host import flow
from awsworld.lambda_host.container import Container
from awsworld.local import LocalAWS
from awsworld.local.lambda_versions import FunctionVersions
from awsworld.world.deployments import Deployment
from awsworld.world.errors import HookNotFoundError

from .lambda_env import EventSourceMapping
from .versions_app import BROKEN_CHARGING, CHARGING, V1, V2

FUNCTION = "awsworld-test-flow"


@pytest.fixture
def versions(local: LocalAWS, lambda_environment: dict[str, str], monkeypatch: pytest.MonkeyPatch
             ) -> Iterator[FunctionVersions]:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", FUNCTION)
    with ThreadPoolExecutor(4) as pool:
        found = FunctionVersions(lambda: AWSWorld(local.config), pool)
        yield found
        found.close()


async def _until(esm: EventSourceMapping, versions: FunctionVersions, done: Any, timeout: float = 60) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await done():
        assert loop.time() < deadline, "not done in time"
        await esm.poll()
        await asyncio.to_thread(versions.settle)


async def _hook(world: AWSWorld, token: str) -> bool:
    try:
        await world.hooks.get_by_token(token, resolve_data="none")
    except HookNotFoundError:
        return False
    return True


async def _ended(world: AWSWorld, run_id: str) -> bool:
    return (await world.runs.get(run_id, resolve_data="none")).status in ("completed", "failed")


def _live(container: Container) -> Any:
    return lambda event, context: flow.handle(event, context, container)


async def test_a_run_stays_on_its_version_after_the_alias_moves(local: LocalAWS, versions: FunctionVersions) -> None:
    world, client = local.world, Client(local.world, check_published=False)
    v1 = versions.publish("1", V1)
    esm = EventSourceMapping(world, _live(v1), visibility_timeout=30)
    old = await client.start("versions.order", "a")
    await _until(esm, versions, lambda: _hook(world, "versions-go:a"))

    v2 = versions.publish("2", V2)
    esm.handler = _live(v2)  # the deploy moved the alias: the mapping invokes version 2 now
    new = await client.start("versions.order", "b")
    await _until(esm, versions, lambda: _hook(world, "versions-go:b"))

    before = v2.world.stats.snapshot()
    handed = len(versions.invokes)
    await client.resume_hook("versions-go:a", {})
    await _until(esm, versions, lambda: _ended(world, old.run_id))
    overhead: RequestStats = v2.world.stats.snapshot() - before
    rerouted = len(versions.invokes) - handed
    await client.resume_hook("versions-go:b", {})
    await _until(esm, versions, lambda: _ended(world, new.run_id))

    assert await old.result(timeout=5) == ["v1:a", "v1:a"], "version 1's code throughout"
    assert await new.result(timeout=5) == ["v2:b", "v2:b"]
    pins = [(await world.runs.get(r.run_id, resolve_data="none")).attributes.get(PIN_ATTRIBUTE) for r in (old, new)]
    assert pins == ["v1", "v2"]
    # The hook's wake (sent from outside: unaddressed) and the sleep's continuation (queued by version 1's flow:
    # addressed to v1) each reached version 2 and were handed over, as one Invoke each.
    assert rerouted == 2, [event["awsworldHandOver"]["reroutes"] for event in versions.invokes]
    assert {e["awsworldHandOver"]["to"] for e in versions.invokes} == {"v1"}
    registered = {d.deployment_id: d for d in await world.deployments.read()}
    assert set(registered) == {"v1", "v2"} and registered["v1"].target == f"{FUNCTION}:1"
    assert v1.worker.deployment == "v1"
    # What re-routing cost version 2: the unaddressed wake read the run's head and log once (to find its pin); the
    # addressed continuation cost nothing but its Invoke.
    print(f"\nre-routed deliveries: {rerouted}; live version's requests for them: {dict(overhead.requests)}; "
          f"RRU {overhead.read_units:.1f}, WRU {overhead.write_units:.1f}")
    assert dict(overhead.requests) == {"dynamodb.GetItem": 1, "dynamodb.Query": 1}, dict(overhead.requests)


async def test_a_deleted_versions_run_fails_with_the_typed_error_after_three_reroutes(
        local: LocalAWS, versions: FunctionVersions) -> None:
    world, client = local.world, Client(local.world, check_published=False)
    esm = EventSourceMapping(world, _live(versions.publish("1", V1)), visibility_timeout=30)
    run = await client.start("versions.order", "c")
    await _until(esm, versions, lambda: _hook(world, "versions-go:c"))
    esm.handler = _live(versions.publish("2", V2))
    versions.delete("1")  # awsworld deployments retire v1 (refused while it holds runs): deleted by hand

    await client.resume_hook("versions-go:c", {})
    await _until(esm, versions, lambda: _ended(world, run.run_id))
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=5)
    assert failed.value.code == DEPLOYMENT_MISMATCH and "'v1'" in str(failed.value)
    assert "after 3 re-routes" in str(failed.value)
    assert versions.invokes == [], "no version was invoked: it was gone"


async def test_a_rollback_runs_a_failing_steps_next_attempts_on_the_version_rolled_back_to(
        local: LocalAWS, versions: FunctionVersions) -> None:
    """Version 22 (live) breaks a step; ``awsworld upgrade RUN --to v21`` moves its run back to version 21. The
    step's next attempt was queued by version 22, addressed to itself: version 22 reads the run's pin before the
    body runs and hands the message to version 21 (it ran every remaining attempt on the broken code, the run
    pinned to v21). (Versions of their own: the stack's deployments' records are the other tests' too.)
    That read costs every queued step message of a pinned run one ``GetItem`` of the run, on the live version too
    (``_deployments.routing.reads_step_pin``)."""
    world, client = local.world, Client(local.world, check_published=False)
    versions.publish("21", CHARGING)
    live = versions.publish("22", BROKEN_CHARGING)
    esm = EventSourceMapping(world, _live(live), visibility_timeout=30)

    async def failed_once() -> bool:
        steps = (await world.steps.list(run.run_id, resolve_data="none")).data
        return bool(steps) and steps[0].error is not None

    run = await client.start("versions.checkout", "r")  # pinned by its first delivery, on the live v22
    await _until(esm, versions, failed_once)
    moved = await upgrade_run(world, run.run_id, "v21", CHARGING)
    assert (moved.outcome, moved.source, moved.target) == ("moved", "v22", "v21"), moved
    await _until(esm, versions, lambda: _ended(world, run.run_id))
    assert await run.result(timeout=5) == "charged r at attempt 2", "version 1's step ran the second attempt"
    assert (await world.runs.get(run.run_id, resolve_data="none")).attributes[PIN_ATTRIBUTE] == "v21"
    # The upgrade's wake (addressed to v21) and the step's second attempt (queued by v22, addressed to v22, whose
    # read of the run found it on v21) reached version 22 and were handed to version 21 (with any other wake).
    handed = [(e["awsworldHandOver"]["to"], '"stepId"' in e["awsworldHandOver"]["record"]["body"])
              for e in versions.invokes]
    assert ("v21", True) in handed and {to for to, _ in handed} == {"v21"}, handed


async def test_retiring_a_drained_version_deletes_it_and_refuses_one_with_runs(
        local: LocalAWS, lambda_environment: dict[str, str]) -> None:
    """``awsworld deployments retire`` as a process, on the emulator's Lambda API (moto keeps functions and versions,
    though it runs none): a drained version's record is marked retired and its Lambda version deleted; a version
    that still holds a run is refused, and nothing is written or deleted."""
    if local.sqs_s3 != "moto":
        pytest.skip("the Lambda API of the emulator is moto's")
    kw: dict[str, Any] = {"endpoint_url": local.endpoint_url, "region_name": "us-east-1",
                          "aws_access_key_id": "awsworldlocal", "aws_secret_access_key": "local"}
    iam, lam = boto3.client("iam", **kw), boto3.client("lambda", **kw)
    role = iam.create_role(RoleName=f"flow-{secrets.token_hex(4)}", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    def artifact(version: int) -> bytes:
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as archive:
            archive.writestr("flow.py", f"def handler(event, context):\n    return {version}\n")
        return code.getvalue()

    name = f"awsworld-retire-{secrets.token_hex(4)}"
    lam.create_function(FunctionName=name, Runtime="python3.13", Role=role, Handler="flow.handler",  # names: keep
                        Code={"ZipFile": artifact(1)}, Publish=True)
    lam.update_function_code(FunctionName=name, ZipFile=artifact(2), Publish=True)  # a deploy: version 2
    world = await local.new_world()  # its own table: the other tests' deployments are not this test's
    config = world.config
    assert config.queue_url and config.dlq_url
    own = {"AWSWORLD_TABLE": config.table_name, "AWSWORLD_BUCKET": config.bucket_name,
           "AWSWORLD_QUEUE_URL": config.queue_url, "AWSWORLD_DLQ_URL": config.dlq_url}
    now = datetime.now(UTC)
    for version, registered in (("1", now - timedelta(hours=2)), ("2", now - timedelta(hours=1)), ("3", now)):
        await world.deployments.register(Deployment(f"v{version}", "the flow function", registered,
                                                    target=f"{name}:{version}"))
    held = await Client(world, check_published=False).options(deployment="v2").start("versions.order", "held")

    def retire(deployment: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "awsworld.cli", "deployments", "retire", deployment],
                              capture_output=True, text=True, timeout=60,
                              env={**{k: v for k, v in os.environ.items() if k != "AWSWORLD_MODULES"}, **own})

    def versions() -> list[str]:
        return [v["Version"] for v in lam.list_versions_by_function(FunctionName=name)["Versions"]]

    done = await asyncio.to_thread(retire, "v1")
    assert done.returncode == 0 and done.stdout.strip() == f"retired v1 (deleted {name}:1)", done
    assert versions() == ["$LATEST", "2"]
    refused = await asyncio.to_thread(retire, "v2")
    assert refused.returncode == 1 and f"still holds 1 unfinished run(s) ({held.run_id})" in refused.stderr, refused
    assert versions() == ["$LATEST", "2"]
    records = {d.deployment_id: d.retired for d in await world.deployments.read()}
    assert records == {"v1": True, "v2": False, "v3": False}
