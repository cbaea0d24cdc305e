"""IAM from the calls the handlers really make: run the deploy workloads through the flow and webhook handlers, each on
its own container (as each function is deployed), and the World server's callers (``HttpClient``, a plain HTTP
service, the TypeScript runtime) through ``serve.handler`` behind its Function URL (``FunctionUrl``), record every
AWS request each function's clients make and the resource it names, map each to the IAM action that authorizes it,
and compare with that function's role in ``template.yaml``. The same for the ``ClientPolicy`` managed policy (the
stack's ``ClientPolicyArn``): a client of its own (a web app's process) starts, reads, resumes, fails and cancels
runs, and the policy must grant exactly what it calls. And for ``OperatorPolicy`` (``OperatorPolicyArn``): the
``awsworld`` commands an operator runs (``dlq`` and its redrive, ``limits``, ``schedules``, ``deployments`` and
``upgrade``, ``wake``, ``skip``, ``fail``, ``delete``, the reads, starts, hooks and cancels) run in this process through
``awsworld.cli.main``, every World they open traced into one ``Trace``, and the UI's API on a traced World too.

A used action the role does not grant fails (the function would get AccessDenied in AWS); a granted action
no traced path uses fails too (a surplus grant: remove it), unless ``NOT_CALLED_BY_CODE`` says why the role
needs it although the code never makes that call. When a handler starts making a new call, this test names
it: grant it in ``template.yaml`` (or, if it truly cannot be reached in a test, list it below with the reason).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fnmatch
import io
import json
import secrets
import time
import zipfile
from collections import Counter
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from awsworld import Client, Concurrency, Schedule, create_hook, get_writable, resume_hook, sleep, step, workflow
from awsworld import aws as aws_package
from awsworld._http.listen import listening
from awsworld._http.push import FLOW_ROUTE
from awsworld._worker.tick import TICK_BODY
from awsworld.authoring.errors import WorkflowRunCancelledError, WorkflowRunFailedError
from awsworld.aws import AWSWorld
from awsworld.aws.config import AWSConfig
from awsworld.aws.encryption.run_keys import TABLE_CONTEXT_KEY
from awsworld.cli import main as awsworld_cli
from awsworld.client.http_world import HttpWorld
from awsworld.lambda_host import flow, webhook
from awsworld.lambda_host import observability as obs
from awsworld.lambda_host.container import Container
from awsworld.local import LocalAWS, MotoServer
from awsworld.world.deployments import Deployment
from awsworld.world.entities import TERMINAL_RUN_STATUSES
from awsworld.world.errors import HookNotFoundError
from awsworld.world.ids import new_ulid
from awsworld.world.messages import FlowMessage, queue_name_for

from . import app
from .conftest import load_entry_point
from .lambda_env import EventSourceMapping, LambdaContext
from .test_template import (
    IN_A_VPC,
    NETWORK_INTERFACE_ACTIONS,
    STEP_POLICIES_IF_GIVEN,
    as_list,
    resolved,
    statements,
)
from .test_webhook_handler import url_event, wait_for_hook

KIB = 1024
Grant = tuple[str, str]  # (IAM action, resource kind: "table", "index/<name>", "FlowQueue", "runs/*", ...)
ROLES = ["FlowFunctionRole", "WebhookFunctionRole", "WorldServerFunctionRole", "ClientPolicy", "OperatorPolicy"]

LAMBDA_USES_THE_ROLE: dict[Grant, str] = {
    ("logs:CreateLogStream", "logs"): "Lambda writes the function's logs with its role",
    ("logs:PutLogEvents", "logs"): "Lambda writes the function's logs with its role",
    ("xray:PutTraceSegments", "*"): "Lambda sends traces with the role (only when EnableTracing is true)",
    ("xray:PutTelemetryRecords", "*"): "Lambda sends traces with the role (only when EnableTracing is true)",
}
"""What Lambda itself does with each function's role: write its log group, send its traces."""

# Grants the role needs although the handler's code never makes that call. Each says why; the test fails if an
# entry is no longer granted (a stale line here), so this list only ever holds what the template still grants.
NOT_CALLED_BY_CODE: dict[str, dict[Grant, str]] = {
    "FlowFunctionRole": {
        ("sqs:ReceiveMessage", "FlowQueue"): "the SQS event source mapping polls the queue with the function's role",
        ("sqs:GetQueueAttributes", "FlowQueue"): "the event source mapping reads the queue's attributes with it",
        ("sqs:DeleteMessage", "FlowQueue"): "the event source mapping deletes the records not reported as failed",
        ("s3:ListBucket", "bucket"): "not a call: without it S3 answers GetObject of a missing key with AccessDenied, "
                                     "not NoSuchKey, which the code handles (a gone queue payload is dead-lettered)",
        **LAMBDA_USES_THE_ROLE,
        **{(action, "*"): "Lambda makes the function's network interfaces with the role (only in a VPC: SubnetIds)"
           for action in NETWORK_INTERFACE_ACTIONS},
    },
    "WebhookFunctionRole": LAMBDA_USES_THE_ROLE,
    # s3:ListBucket: deleting a run lists its runs/<id>/ prefix (World.delete_run), so the server, a client and an
    # operator call it (and without it S3 would answer GetObject of a missing key with AccessDenied, not NoSuchKey).
    "WorldServerFunctionRole": LAMBDA_USES_THE_ROLE,
    "ClientPolicy": {},
    "OperatorPolicy": {},
}

# The grants above that the template holds only when a parameter asks for them: absent with every parameter's
# default, present with these values (test_a_parameter_adds_exactly_the_grants_it_is_for).
SWITCHED_ON_BY: dict[str, tuple[dict[str, str], set[Grant]]] = {
    "EnableTracing": ({"EnableTracing": "true"}, {("xray:PutTraceSegments", "*"), ("xray:PutTelemetryRecords", "*")}),
    "a VPC": (IN_A_VPC, {(action, "*") for action in NETWORK_INTERFACE_ACTIONS}),
}

# The roles the template holds only when a parameter asks for their function.
ROLE_EXISTS_WITH = {"WorldServerFunctionRole": {"WorldServer": "true"}}

# Operations whose IAM action is named differently, or that are authorized per item (a transaction needs the
# per-item action of each of its operations; there is no dynamodb:TransactWriteItems permission).
_SINGLE_ACTIONS = {
    "sqs.SendMessageBatch": "sqs:SendMessage",
    "sqs.DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs.ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
    "s3.HeadObject": "s3:GetObject",
    "s3.ListObjectsV2": "s3:ListBucket",
    "s3.ListObjects": "s3:ListBucket",
    "s3.DeleteObjects": "s3:DeleteObject",
}
_TRANSACT_ACTIONS = {"Put": "dynamodb:PutItem", "Update": "dynamodb:UpdateItem", "Delete": "dynamodb:DeleteItem",
                     "ConditionCheck": "dynamodb:ConditionCheckItem", "Get": "dynamodb:GetItem"}
_KNOWN = {
    "dynamodb": {"GetItem", "BatchGetItem", "Query", "Scan", "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem",
                 "TransactWriteItems", "TransactGetItems"},
    "sqs": {"SendMessage", "SendMessageBatch", "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility",
            "ChangeMessageVisibilityBatch", "ReceiveMessage", "GetQueueAttributes", "GetQueueUrl"},
    "s3": {"GetObject", "PutObject", "PutObjectTagging", "DeleteObject", "DeleteObjects", "HeadObject",
           "ListObjectsV2", "ListObjects"},
    "kms": {"GenerateDataKey", "Decrypt"},
    "lambda": {"Invoke", "DeleteFunction"},
}
FLOW_FUNCTION = "awsworld-trace-flow"
"""The traced flow function's name (``AWS_LAMBDA_FUNCTION_NAME``): it hands deliveries to its own versions."""
FLOW_VERSION = "2"
"""The traced flow function's version: runs are pinned to ``v2``; one pinned to ``v1`` is handed to version 1."""


@dataclass
class Trace:
    """Every request one container's clients made: counted by ``RequestStats`` and, with the resource each
    names (from the API parameters), by a ``before-parameter-build`` hook on the same clients."""

    world: AWSWorld
    grants: set[Grant] = field(default_factory=set)
    operations: Counter[str] = field(default_factory=Counter)
    unmapped: list[str] = field(default_factory=list)

    def record(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        service, name = model.service_model.service_name, model.name
        self.operations[f"{service}.{name}"] += 1
        if name not in _KNOWN.get(service, ()):
            self.unmapped.append(f"{service}.{name}")
            return
        self.grants.update(self._grants(service, name, params))

    def _grants(self, service: str, name: str, params: dict[str, Any]) -> set[Grant]:
        config = self.world.config
        if service == "dynamodb":
            if name in ("TransactWriteItems", "TransactGetItems"):
                found = set()
                for entry in params["TransactItems"]:
                    ((kind, body),) = entry.items()
                    found.add((_TRANSACT_ACTIONS[kind], self._table(body)))
                return found
            if name in ("BatchGetItem", "BatchWriteItem"):
                actions = {"dynamodb:BatchGetItem"} if name == "BatchGetItem" else {
                    "dynamodb:PutItem" if "PutRequest" in r else "dynamodb:DeleteItem"
                    for requests in params["RequestItems"].values() for r in requests}
                return {(a, self._table({"TableName": t})) for a in actions for t in params["RequestItems"]}
            return {(f"dynamodb:{name}", self._table(params))}
        if service == "sqs":
            url = params.get("QueueUrl")
            queue = {config.queue_url: "FlowQueue", config.dlq_url: "DeadLetterQueue"}.get(url, f"other queue {url}")
            return {(_SINGLE_ACTIONS.get(f"sqs.{name}", f"sqs:{name}"), queue)}
        if service == "lambda":
            # A hand-over to another version of the function itself, or an operator deleting a retired version
            # (lambda_host/versions.py): always a version of the flow function, never the function itself.
            assert params["FunctionName"] == FLOW_FUNCTION and params.get("Qualifier"), params
            return {("lambda:InvokeFunction" if name == "Invoke" else f"lambda:{name}", "FlowFunction:*")}
        if service == "kms":
            # The grant's condition: every data key names this stack's table in its encryption context.
            assert params["EncryptionContext"][TABLE_CONTEXT_KEY] == config.table_name, params
            assert name == "Decrypt" or params["KeyId"] == config.kms_key_id, params
            return {(f"kms:{name}", "PayloadKmsKeyArn")}
        assert params.get("Bucket") == config.bucket_name, params.get("Bucket")
        key = str(params.get("Key") or "")
        kind = "bucket" if name.startswith("List") or not key else next(
            (f"{prefix}*" for prefix in ("runs/", "queue/") if key.startswith(prefix)), f"key {key}")
        found = {(_SINGLE_ACTIONS.get(f"s3.{name}", f"s3:{name}"), kind)}
        if name == "PutObject" and params.get("Tagging"):  # tags on a new object need the tagging permission too
            found.add(("s3:PutObjectTagging", kind))
        return found

    def _table(self, body: dict[str, Any]) -> str:
        assert body["TableName"] == self.world.config.table_name, body["TableName"]
        return f"index/{body['IndexName']}" if body.get("IndexName") else "table"


def _resource_kind(resource: Any) -> str:
    """A template resource as the kind ``Trace`` names: the table, an index, a queue, a bucket prefix, logs."""
    if resource == "*":
        return "*"
    if resource == {"Ref": "PayloadKmsKeyArn"}:
        return "PayloadKmsKeyArn"
    text = json.dumps(resource)
    for name in ("FlowQueue", "DeadLetterQueue"):
        if f'"{name}", "Arn"' in text:
            return name
    if '"Table", "Arn"' in text:
        return "table"
    if "LogGroup" in text:
        return "logs"
    if '"Bucket", "Arn"' in text:
        return "bucket"
    sub = resource.get("Fn::Sub", "") if isinstance(resource, dict) else ""
    if sub == "${FlowFunction.Arn}:*":
        return "FlowFunction:*"
    if sub.startswith("${Table.Arn}/index/"):
        return sub.removeprefix("${Table.Arn}/")
    if sub.startswith("${Bucket.Arn}/"):
        return sub.removeprefix("${Bucket.Arn}/")
    raise AssertionError(f"a resource this test cannot name: {resource!r}")


def granted(template: dict[str, Any], role: str) -> set[Grant]:
    """What ``role`` grants: its own policies' statements and those of the policies attached to it (``Roles``).
    Not the user's ``StepPolicyArns`` (what their steps call is no code path of awsworld's): the flow function's
    role may carry those, when given, and no other managed policy, which this test could not see into."""
    managed = template["Resources"][role]["Properties"].get("ManagedPolicyArns")
    assert managed in (None, STEP_POLICIES_IF_GIVEN), f"{role} carries a managed policy whose grants are untraced"
    attached = {name for name, resource in template["Resources"].items() if resource["Type"] == "AWS::IAM::Policy"
                and {"Ref": role} in as_list(resource["Properties"].get("Roles", []))}
    return {(action, _resource_kind(resource)) for name, _, statement in statements(template)
            if name == role or name in attached
            for action in as_list(statement["Action"]) for resource in as_list(statement["Resource"])}


def covers(grant: Grant, used: Grant) -> bool:
    """A grant authorizes a request: the same action, on a resource its kind names (``index/*`` covers each
    index, as the ARN pattern does)."""
    return grant[0] == used[0] and fnmatch.fnmatchcase(used[1], grant[1])


# ------------------------------------------------------------------------------------------ workloads


@step(name="trace.write_stream")
async def write_stream(lines: int) -> str:
    writer = get_writable("progress")
    for i in range(lines):
        await writer.write(f"line {i}\n")
    return "r" * (20 * KIB)  # a result over the inline limit: stored in S3


@workflow(name="trace.streams_and_large_values")
async def streams_and_large_values(blob: str) -> int:
    """A large input (read from S3), a stream (S3 chunks and their index) and a large step result."""
    return len(await write_stream(3)) + len(blob)


@workflow(name="trace.parent")
async def parent(blob: str) -> int:
    """A child run: the flow function creates a run (and, encrypted, makes its data key)."""
    return await streams_and_large_values(blob) + 1


@workflow(name="trace.sends")
async def sends(token: str, payload: str) -> str:
    """One run resumes another's hook (the built-in resume step: the target's token, log and wake, from the flow
    function), with a payload over the inline limit (stored in S3 for the target run)."""
    await resume_hook(token, payload, wait="1m")
    return "sent"


@workflow(name="trace.limited", concurrency=Concurrency(1, key=lambda token: "shared"))
async def limited(token: str) -> object:
    """One run at a time: a second start waits for the slot (``awsworld limits`` shows and changes it)."""
    async with create_hook(token=token) as hook:
        return await hook


@workflow(name="trace.sleeps")
async def sleeps(value: str) -> str:
    """An hour's sleep, which ``awsworld skip`` ends."""
    await sleep(3600)
    return value


@pytest.fixture(scope="module")
async def local(moto_server: MotoServer) -> AsyncIterator[LocalAWS]:
    """This module's stack has payload encryption on, so the trace sees the KMS calls every role makes."""
    async with LocalAWS("moto", moto=moto_server, run_workflows=False, encrypt_payloads=True) as aws:
        yield aws


@dataclass
class Function:
    container: Container
    trace: Trace
    invoke: Callable[[Any, Any], dict[str, Any]]


async def _traced(handle: Callable[..., dict[str, Any]], version: str | None = None) -> AsyncIterator[Function]:
    container = Container(version=version)  # a function of its own: its clients, its loop, as deployed
    world = container.world
    clients = await asyncio.to_thread(container.run, _open_clients(world))
    trace = Trace(world)
    for client in clients:
        service = client.meta.service_model.service_id.hyphenize()
        client.meta.events.register(f"before-parameter-build.{service}", trace.record)
    instrumented = obs.instrument(lambda event, context: handle(event, context, container))
    try:
        yield Function(container, trace, instrumented)
    finally:
        await asyncio.to_thread(container.reset)
        container.loop.close()


async def _open_clients(world: AWSWorld) -> list[Any]:
    return [await world.clients.get(service) for service in ("dynamodb", "sqs", "s3", "kms", "lambda")]


@pytest.fixture(scope="module")
async def flow_function(lambda_environment: dict[str, str]) -> AsyncIterator[Function]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_LAMBDA_FUNCTION_NAME", FLOW_FUNCTION)
        async for function in _traced(flow.handle, version=FLOW_VERSION):
            yield function


@pytest.fixture(scope="module")
async def webhook_function(lambda_environment: dict[str, str]) -> AsyncIterator[Function]:
    async for function in _traced(webhook.handle):
        yield function


@pytest.fixture(scope="module")
async def world_server(lambda_environment: dict[str, str]) -> AsyncIterator[tuple[httpx.AsyncClient, FunctionUrl,
                                                                               Trace]]:
    """The World server's function (``handlers/serve.py``), its Worlds traced; an HTTP client of its URL."""
    from awsworld.lambda_host import serve

    trace = Trace(AWSWorld(AWSConfig.from_env()))  # (its stats: the counts of what the server's Worlds sent)
    opened = traced_world(trace)
    url = FunctionUrl(load_entry_point("serve").handler)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(serve, "AWSWorld", opened)
        patch.setattr(serve, "_handler", None)  # (a cold start: built on the first request)
        try:
            async with httpx.AsyncClient(transport=url, base_url=WORLD_SERVER_URL) as http:
                yield http, url, trace
        finally:
            url.close_worlds(opened.opened)
            await trace.world.close()


def done(run: Any) -> Callable[[], Any]:
    async def check() -> bool:
        return await run.status() in TERMINAL_RUN_STATUSES

    return check


async def post(function: Function, event: dict[str, Any]) -> int:
    response = await asyncio.to_thread(function.invoke, event, LambdaContext(30_000, "awsworld-trace-webhook"))
    return int(response["statusCode"])


async def run_workloads(local: LocalAWS, flow_fn: Function, webhook_fn: Function) -> None:
    """What the deploy tests do, through these two functions: fan-out, sleeps, retries, budget continuations,
    streams and large values through the flow function; webhook requests of every outcome through the webhook
    function; and the failures the flow function answers (an unknown workflow, a record that is not ours)."""
    client = local.client
    assert client is not None
    esm = EventSourceMapping(local.world, flow_fn.invoke)
    runs = [await client.start(app.fan_out_sleep, 3, "s"), await client.start(app.flaky_pair, secrets.token_hex(4)),
            await client.start(streams_and_large_values, "b" * (20 * KIB)), await client.start(app.quick, "q"),
            await client.start(parent, "c" * (20 * KIB))]
    signalled = f"trace-signal-{secrets.token_hex(6)}"
    runs += [await client.start(app.plain_hook, signalled), await client.start(sends, signalled, "g" * (20 * KIB))]
    await esm.run_until(_all(runs), timeout=90)
    assert await runs[-2].result(timeout=5) == "g" * (20 * KIB)
    slow = await client.start(app.slow_serial, secrets.token_hex(4), 4)
    await esm.run_until(done(slow), timeout=60, timeout_ms=11_000)  # 1 s budgets: continuations

    hooked = await client.start(app.webhook_twice)
    hook = await wait_for_hook(local, esm, hooked)
    big = secrets.token_bytes(100 * KIB)  # stored in S3 by the webhook function
    large = url_event("PUT", f"/webhooks/{hook.token}", big, content_type="application/octet-stream")
    assert await post(webhook_fn, large) == 202
    assert await post(webhook_fn, large) == 202  # a repeat: its S3 value is stored, then discarded
    small = url_event("POST", f"/webhooks/{hook.token}", "{}", headers={"Idempotency-Key": "k"})
    sqs = webhook_fn.trace.world.clients._clients["sqs"]
    fail = _fail_once(sqs, "SendMessage")
    assert await post(webhook_fn, small) == 503  # the wake failed: the dedup claim is released
    sqs.meta.events.unregister("before-call.sqs.SendMessage", fail)
    assert await post(webhook_fn, small) == 202
    assert await post(webhook_fn, url_event("POST", f"/webhooks/{secrets.token_hex(32)}", "{}")) == 404
    assert await post(webhook_fn, url_event("POST", f"/webhooks/{hook.token}/heartbeat")) == 202
    assert await post(webhook_fn, url_event("POST", f"/webhooks/{secrets.token_hex(32)}/heartbeat")) == 404
    await esm.run_until(done(hooked), timeout=60)
    assert await post(webhook_fn, url_event("POST", f"/webhooks/{hook.token}", "{}")) == 410  # its run ended
    assert await post(webhook_fn, url_event("POST", f"/webhooks/{hook.token}/heartbeat")) == 410
    # Webhooks that answer themselves: a static answer (read from the hook's hook_created), and a step's, which
    # the webhook function reads from the run's response stream while the flow function runs the step.
    static = await client.start(app.webhook_static)
    hook = await wait_for_hook(local, esm, static)
    assert await post(webhook_fn, url_event("POST", f"/webhooks/{hook.token}", "{}")) == 200
    manual = await client.start(app.webhook_manual)
    hook = await wait_for_hook(local, esm, manual)
    sender = asyncio.create_task(post(webhook_fn, url_event("POST", f"/webhooks/{hook.token}", "{}")))
    await esm.run_until(_all([static, manual]), timeout=60)
    assert await asyncio.wait_for(sender, timeout=30) == 200

    # The tick (what the schedule sends): the watchdog finds a run whose start message was lost by the byDue
    # index, snoozes it and wakes it, and the flow function runs it to its end.
    sqs_test = await local.world.clients.sqs()
    lost = await client.start(app.quick, "lost")
    await sqs_test.purge_queue(QueueUrl=local.world.config.queue_url)
    assert await local.world.watch.correct(lost.run_id, datetime.now(UTC) - timedelta(minutes=2), seq=1)
    await sqs_test.send_message(QueueUrl=local.world.config.queue_url, MessageBody=TICK_BODY)
    await esm.run_until(done(lost), timeout=60)

    # A schedule with a due tick (made three minutes ago; its arguments over 1 KB, in an item of their own): the
    # tick's schedules job lists the schedules, reads the arguments, claims the tick and starts its run.
    every = Schedule(every="1m", args=("s" * (20 * KIB),))
    made = every.state("trace-schedule", "deploy.quick", datetime.now(UTC) - timedelta(minutes=3), source="api")
    assert await local.world.schedules.write(made, expected_version=None)
    await sqs_test.send_message(QueueUrl=local.world.config.queue_url, MessageBody=TICK_BODY)

    async def scheduled() -> bool:
        last = (await local.world.schedules.get("trace-schedule")).last_run_id
        return last is not None and await client.get_run(last).status() in TERMINAL_RUN_STATUSES

    await esm.run_until(scheduled, timeout=60)

    # A run pinned to version 1, registered (a start refuses a deployment that is not) but whose Lambda version does
    # not exist here (the emulator has no such function, as when it was deleted outside `awsworld deployments
    # retire`): version 2 hands its delivery over with an Invoke, finds the version gone, and after three re-routes
    # fails the run with DeploymentMismatchError. (The operator's workload registers the same record again: kept.)
    await local.world.deployments.register(Deployment("v1", "the flow function",
                                                      datetime.now(UTC) - timedelta(days=1),
                                                      target=f"{FLOW_FUNCTION}:1"))
    old = await client.options(deployment="v1").start(app.quick, "pinned")
    await esm.run_until(done(old), timeout=60)
    with pytest.raises(WorkflowRunFailedError, match="pinned to deployment 'v1'"):
        await old.result(timeout=5)

    # Failures the flow function answers: a record that is not ours (dead-lettered at once) and a workflow this
    # deployment lacks (backed off with a shorter visibility).
    await sqs_test.send_message(QueueUrl=local.world.config.queue_url, MessageBody="not an awsworld message")
    created = await local.world.events.create(None, {"eventType": "run_created",
                                                     "eventData": {"workflowName": "trace.not_deployed"}})
    assert created.run is not None
    await local.world.queue(queue_name_for("trace.not_deployed"),
                            FlowMessage(created.run.run_id, "trace.not_deployed").to_payload())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not flow_fn.trace.operations["sqs.ChangeMessageVisibility"]:
        await esm.poll()


def _all(runs: list[Any]) -> Callable[[], Any]:
    async def check() -> bool:
        return all([await r.status() in TERMINAL_RUN_STATUSES for r in runs])

    return check


def _fail_once(client: Any, operation: str) -> Callable[..., None]:
    failed: list[bool] = []

    def fail(**_: Any) -> None:
        if not failed:
            failed.append(True)
            raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "injected"}}, operation)

    client.meta.events.register(f"before-call.sqs.{operation}", fail)
    return fail


async def run_client_workload(local: LocalAWS, client: Client, flow_fn: Function) -> None:
    """What a web app does with the client policy: start runs (a large input goes to S3; an idempotent start
    again with the same run id stores it and discards it), read them (result, run, steps, events, listings by
    workflow and by status, a stream, a child run the flow function created), resume one hook with a large
    payload, fail another, cancel a run, delete the resumed one. The flow function runs the runs meanwhile; payloads
    are encrypted."""
    esm = EventSourceMapping(local.world, flow_fn.invoke)
    blob = "c" * (20 * KIB)
    big = await client.options(run_id=f"trace-client-{secrets.token_hex(6)}").start(streams_and_large_values, blob)
    again = await client.options(run_id=big.run_id).start(streams_and_large_values, blob)
    assert again.run_id == big.run_id
    tokens = [f"trace-client-{purpose}-{secrets.token_hex(6)}" for purpose in ("resume", "fail", "cancel")]
    hooked = [await client.start(app.plain_hook, token) for token in tokens]
    family = await client.start(parent, "d")

    async def ready() -> bool:
        try:
            for token in tokens:
                await local.world.hooks.get_by_token(token, resolve_data="none")
        except HookNotFoundError:
            return False
        return all([await r.status() in TERMINAL_RUN_STATUSES for r in (big, family)])

    await esm.run_until(ready, timeout=90)
    # A run another process created (the child the flow function started): its data key is unwrapped here.
    [child] = await family.children()
    assert await child.result(timeout=5) == 20 * KIB + 1
    assert await big.result(timeout=5) == 40 * KIB
    assert [chunk async for chunk in big.stream("progress")] == [f"line {i}\n".encode() for i in range(3)]
    assert (await client.get_run(big.run_id).get()).input is not None
    assert await big.steps() and await big.events()
    assert big.run_id in [r.run_id for r in (await client.list_runs(workflow=streams_and_large_values)).data]
    await client.list_runs(status="completed")

    await hooked[0].wait_for_hook(tokens[0])
    payload = "p" * (20 * KIB)  # stored in S3 by the client
    await client.resume_hook(tokens[0], payload)
    await client.fail_hook(tokens[1], "declined", code="DECLINED")
    await client.cancel(hooked[2].run_id, reason="trace")
    await esm.run_until(_all(hooked), timeout=60)
    assert await hooked[0].result(timeout=5) == payload
    with pytest.raises(WorkflowRunFailedError, match="declined"):
        await hooked[1].result(timeout=5)
    with pytest.raises(WorkflowRunCancelledError, match="trace"):
        await hooked[2].result(timeout=5)
    # Erasure: the resumed run (its token, its payload's object under runs/<id>/) goes now (Client.delete_run).
    assert await client.delete_run(hooked[0].run_id) is True

    # Schedules at run time (arguments over 1 KB: an item of their own): every call of client.schedules.
    schedules = client.schedules
    await schedules.create("trace-client", app.quick, Schedule(every="1h", args=("t" * (20 * KIB),)))
    assert [s.schedule_id for s in await schedules.list()] == ["trace-client", "trace-schedule"]
    assert (await schedules.describe("trace-client")).upcoming
    await schedules.pause("trace-client")
    await schedules.resume("trace-client")
    triggered = await schedules.trigger("trace-client")
    now = datetime.now(UTC)
    await schedules.backfill("trace-client", now - timedelta(hours=2), now - timedelta(minutes=1))
    await schedules.delete("trace-client")
    assert triggered.run_id is not None
    await esm.run_until(done(client.get_run(triggered.run_id)), timeout=60)


class TracedWorld(AWSWorld):
    """An ``AWSWorld`` whose requests are recorded in a ``Trace`` (``traced_world``)."""

    opened: list[AWSWorld]


def traced_world(trace: Trace) -> type[TracedWorld]:
    """``AWSWorld`` as the code under test opens it (the CLI: ``cli.output.remote``, ``cli.dlq``; the World server:
    ``lambda_host/serve.py``): every World it opens records its requests in ``trace``, counts them in
    ``trace.world``'s stats, and is kept in ``opened`` (to be closed on the loop it ran on)."""

    class Traced(TracedWorld):
        opened = []

        def __init__(self, config: AWSConfig | None = None) -> None:
            super().__init__(config)
            self.clients.stats = trace.world.clients.stats
            self.clients.register_handler("before-parameter-build", trace.record)
            self.opened.append(self)

    return Traced


async def operator(*argv: str, code: int = 0) -> str:
    """``awsworld ARGV`` in this process, as an operator's shell runs it (the environment names the stack); on a
    thread, since a command runs its own event loop. Its stdout."""
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()  # (streams writes bytes to .buffer)

    def run() -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return awsworld_cli(list(argv))

    done = await asyncio.to_thread(run)
    out.flush()
    printed = out.buffer.getvalue().decode()  # type: ignore[attr-defined]
    assert done == code, (argv, done, printed, err.getvalue())
    return printed


async def operator_json(*argv: str) -> Any:
    return json.loads(await operator(*argv, "--json"))


def _lambda_versions(local: LocalAWS, versions: int) -> Callable[[], list[str]]:
    """The flow function on the emulator's Lambda API (moto keeps functions and versions, though it runs none),
    with ``versions`` published versions; a function listing its versions."""
    import boto3

    kw: dict[str, Any] = {"endpoint_url": local.endpoint_url, "region_name": "us-east-1",
                          "aws_access_key_id": "awsworldlocal", "aws_secret_access_key": "local"}
    iam, lam = boto3.client("iam", **kw), boto3.client("lambda", **kw)
    role = iam.create_role(RoleName=f"flow-{secrets.token_hex(4)}", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    for version in range(1, versions + 1):
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as archive:
            archive.writestr("flow.py", f"def handler(event, context):\n    return {version}\n")
        if version == 1:
            lam.create_function(FunctionName=FLOW_FUNCTION, Runtime="python3.13", Role=role, Handler="flow.handler",
                                Code={"ZipFile": code.getvalue()}, Publish=True)
        else:
            lam.update_function_code(FunctionName=FLOW_FUNCTION, ZipFile=code.getvalue(), Publish=True)
    return lambda: [v["Version"] for v in lam.list_versions_by_function(FunctionName=FLOW_FUNCTION)["Versions"]]


async def run_operator_workload(local: LocalAWS, flow_fn: Function, ui_world: AWSWorld) -> None:
    """What the person on call does with the operator policy, through the ``awsworld`` commands the docs list
    (docs/operate/iam.md, docs/get-started/cli.md): move runs off an old deployment and retire it (its Lambda
    version deleted); start runs (a large input, a start repeated with its run id, a rerun) and read them (runs,
    describe, events, result, hooks, streams, export, the UI's API); resume, fail and heartbeat hooks, cancel, fail,
    wake and skip runs; change a limit while runs wait on it; pause, resume, trigger, backfill, create and delete
    schedules; list the DLQ and redrive it. The flow function runs the runs meanwhile; payloads are encrypted.
    The test's own setup (a run pinned to the old version, a message in the DLQ) uses ``local``'s World."""
    world, config = local.world, local.world.config
    assert local.client is not None and config.dlq_url
    esm = EventSourceMapping(world, flow_fn.invoke)

    # Deployments: a run pinned to v1 (an older version of the flow function than v2, this one) is moved to v2 by
    # `upgrade` after its replay against the code here, before any delivery, and runs on v2 (its first message,
    # addressed to v1, finds no such version and follows the run's pin); v1, drained, is retired and its Lambda
    # version deleted (the emulator's function is made only then: moto invokes a deleted version as if it were
    # there); prune finds nothing more to retire.
    await world.deployments.register(Deployment("v1", "the flow function", datetime.now(UTC) - timedelta(days=1),
                                                target=f"{FLOW_FUNCTION}:1"))
    pinned_token = f"trace-operator-pinned-{secrets.token_hex(6)}"
    pinned = await local.client.options(deployment="v1").start(app.plain_hook, pinned_token)
    listed = await operator_json("deployments")
    rows = {row["deploymentId"]: row for row in listed["deployments"]}
    assert rows["v1"]["status"] == "draining" and pinned.run_id in rows["v1"]["runs"], rows
    upgraded = await operator("upgrade", "--deployment", "v1", "--to", f"v{FLOW_VERSION}")
    assert upgraded.endswith(f"1 of 1 run(s) moved to v{FLOW_VERSION}\n"), upgraded
    await esm.run_until(lambda: _hooks_exist(world, [pinned_token]), timeout=60)
    versions = await asyncio.to_thread(_lambda_versions, local, 2)
    assert await asyncio.to_thread(versions) == ["$LATEST", "1", "2"]
    assert (await operator("deployments", "retire", "v1")).strip() == f"retired v1 (deleted {FLOW_FUNCTION}:1)"
    assert await asyncio.to_thread(versions) == ["$LATEST", "2"]
    await operator("deployments", "prune", "--keep", "1")

    # Starts and reads: a large input (stored in S3 under a new data key), the same start again with its run id
    # (its value stored, then discarded), a rerun with the recorded input.
    blob = json.dumps(["o" * (20 * KIB)])
    run_id = f"trace-operator-{secrets.token_hex(6)}"
    assert (await operator("start", "trace.streams_and_large_values", blob, "--run-id", run_id)).strip() == run_id
    assert (await operator("start", "trace.streams_and_large_values", blob, "--run-id", run_id)).strip() == run_id
    await esm.run_until(done(local.client.get_run(run_id)), timeout=60)
    assert json.loads(await operator("result", run_id)) == 40 * KIB
    await operator("describe", run_id)
    await operator("events", run_id, "--full")
    await operator("streams", run_id)
    assert await operator("streams", run_id, "progress") == "line 0\nline 1\nline 2\n"
    await operator("runs", "--workflow", "trace.streams_and_large_values")
    await operator("runs", "--status", "completed")
    await operator("runs", "--parked")
    await operator("export", run_id)
    await operator("replay", run_id)
    rerun = (await operator("rerun", run_id)).strip()
    await esm.run_until(done(local.client.get_run(rerun)), timeout=60)

    # Hooks and ends: resume (a large payload, stored by the command), fail a hook, heartbeat one, cancel a run,
    # fail one, wake one, skip a sleep.
    tokens = [f"trace-operator-{purpose}-{secrets.token_hex(6)}" for purpose in ("resume", "fail", "beat", "end")]
    hooked = [(await operator("start", "deploy.plain_hook", json.dumps(token))).strip() for token in tokens]
    sleeping = (await operator("start", "trace.sleeps", json.dumps("slept"))).strip()

    await esm.run_until(lambda: _hooks_exist(world, tokens), timeout=60)
    await operator("hooks", hooked[0])
    await operator("resume", tokens[0], json.dumps("p" * (20 * KIB)))
    await operator("fail-hook", tokens[1], "declined", "--code", "DECLINED")
    await operator("heartbeat-hook", tokens[2])
    await operator("wake", hooked[2])
    await operator("cancel", hooked[2], "--reason", "trace")
    await operator("fail", hooked[3], "--reason", "trace")
    await operator("resume", pinned_token, json.dumps("moved"))
    await esm.run_until(lambda: _has_sleep(world, sleeping), timeout=60)
    await operator("skip", sleeping)
    await esm.run_until(_all([local.client.get_run(r) for r in [*hooked, sleeping, pinned.run_id]]), timeout=60)
    assert await local.client.get_run(hooked[0]).result(timeout=5) == "p" * (20 * KIB)
    assert await local.client.get_run(sleeping).result(timeout=5) == "slept"
    assert await pinned.result(timeout=5) == "moved"
    # Erasure (awsworld delete): the resumed run, its token and the payload's object the command stored in S3.
    assert (await operator("delete", hooked[0], "--yes")).strip() == f"deleted {hooked[0]}"

    # A limit while runs wait on it: the second run waits for the slot; the operator lists and describes the limit,
    # pauses and resumes it, raises it (the waiter starts), ends the runs and resets it.
    limit = "workflow:trace.limited"
    holders = [f"trace-operator-limit-{i}-{secrets.token_hex(6)}" for i in range(2)]
    limited_runs = [(await operator("start", "trace.limited", json.dumps(token))).strip() for token in holders]

    await esm.run_until(lambda: _hooks_exist(world, holders[:1]), timeout=60)
    await operator("limits")
    await operator("limits", "describe", limit)
    await operator("limits", "pause", limit, "--key", "shared")
    await operator("limits", "resume", limit, "--key", "shared")
    await operator("limits", "set", limit, "--key", "shared", "--concurrency", "2")

    await esm.run_until(lambda: _hooks_exist(world, holders), timeout=60)
    for token in holders:
        await operator("resume", token)
    await esm.run_until(_all([local.client.get_run(r) for r in limited_runs]), timeout=60)
    await operator("limits", "reset", limit, "--key", "shared")

    # Schedules: the tick's schedule (made by run_workloads) paused, resumed, triggered; one created from the
    # command line, backfilled and deleted.
    await operator("schedules", "list")
    await operator("schedules", "describe", "trace-schedule")
    await operator("schedules", "pause", "trace-schedule", "--note", "on call")
    await operator("schedules", "resume", "trace-schedule")
    triggered = await operator_json("schedules", "trigger", "trace-schedule")
    await operator("schedules", "create", "trace-operator", "deploy.quick", "--every", "1h",
                   "--args", json.dumps(["t" * (20 * KIB)]))
    now = datetime.now(UTC)
    await operator("schedules", "backfill", "trace-operator", "--start", (now - timedelta(hours=2)).isoformat(),
                   "--end", (now - timedelta(minutes=1)).isoformat())
    await operator("schedules", "delete", "trace-operator")
    await esm.run_until(_all([local.client.get_run(triggered["runId"])]), timeout=60)

    # The run viewer (awsworld ui): its API on a World of the operator's (the command serves the same app on
    # 127.0.0.1 with uvicorn, on the AWSWorld the environment names).
    from httpx import ASGITransport, AsyncClient

    from awsworld.ui import create_app

    async with AsyncClient(transport=ASGITransport(app=create_app(ui_world)), base_url="http://127.0.0.1") as http:
        for path in ("/api/runs", f"/api/runs/{run_id}", f"/api/runs/{run_id}/events",
                     f"/api/runs/{run_id}/streams", f"/api/runs/{run_id}/streams/progress"):
            assert (await http.get(path)).status_code == 200, path

    # The dead-letter queue: a record that is not awsworld's, listed (never its body) and sent back to the flow
    # queue (the flow function's next delivery would dead-letter it again).
    sqs = await world.clients.sqs()
    await sqs.send_message(QueueUrl=config.dlq_url, MessageBody="not an awsworld message (operator)")
    letters = await operator_json("dlq")
    assert letters and all("not an awsworld" not in json.dumps(letter) for letter in letters), letters
    moved = await operator_json("dlq", "redrive")
    assert moved["moved"] >= 1 and not moved["failed"], moved


async def _hooks_exist(world: AWSWorld, tokens: list[str]) -> bool:
    try:
        for token in tokens:
            await world.hooks.get_by_token(token, resolve_data="none")
    except HookNotFoundError:
        return False
    return True


async def _has_sleep(world: AWSWorld, run_id: str) -> bool:
    return any(event.event_type == "wait_created" for event in (await world.events.list(run_id)).data)


WORLD_SERVER_URL = "https://abcdefghij.lambda-url.us-east-1.on.aws"
"""The World server's Function URL as its callers name it (the requests never leave this process)."""


class FunctionUrl(httpx.AsyncBaseTransport):
    """The World server behind its Function URL: each request becomes the event Lambda delivers to ``serve.handler``
    (``handlers/serve.py``: Mangum, the app, an ``AWSWorld`` from the environment), invoked on one thread that keeps
    its event loop between invocations, as an execution environment does; its answer is the URL's (``BUFFERED``).
    IAM's check of the caller (SigV4, ``lambda:InvokeFunctionUrl``) is AWS's, before the function runs."""

    def __init__(self, handler: Callable[[dict[str, Any], Any], dict[str, Any]]) -> None:
        self.handler = handler
        self.environment = ThreadPoolExecutor(max_workers=1, thread_name_prefix="world-server")
        self.requests: list[tuple[str, str]] = []
        """(method, path) of every request the function was invoked with."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        kind = request.headers.get("content-type", "application/json")
        event = url_event(request.method, request.url.path, (body.decode() if kind == "application/json" else body)
                          if body else None, content_type=kind,
                          headers={k: v for k, v in request.headers.items() if k not in ("host", "content-type")})
        event["rawPath"] = request.url.raw_path.split(b"?")[0].decode()
        event["rawQueryString"] = request.url.query.decode()
        self.requests.append((request.method, request.url.path))
        answer = await asyncio.get_running_loop().run_in_executor(
            self.environment, self.handler, event, LambdaContext(120_000, "awsworld-trace-world-server"))
        content = answer.get("body") or ""
        return httpx.Response(answer["statusCode"], headers=answer.get("headers"),
                              content=base64.b64decode(content) if answer.get("isBase64Encoded") else content.encode())

    def close_worlds(self, worlds: list[AWSWorld]) -> None:
        """Close the Worlds the server opened, on its loop, and end its thread."""

        def close() -> None:
            loop = asyncio.get_event_loop()
            for world in worlds:
                loop.run_until_complete(world.close())
            loop.close()

        self.environment.submit(close).result()
        self.environment.shutdown()


def _bytes(data: bytes) -> dict[str, str]:
    """A value as the TypeScript runtime sends it: its serialized bytes, tagged."""
    return {"__type": "Uint8Array", "data": base64.b64encode(data).decode()}


async def run_world_server_workload(local: LocalAWS, http: httpx.AsyncClient, flow_fn: Function) -> None:
    """What the World server's callers do, through ``serve.handler`` behind its Function URL: every route of its table
    (``_http/app.py``). ``HttpClient`` (a ``Client`` on ``HttpWorld``) starts Python runs, which the flow function
    runs (a large input, stored in S3 under a new data key; the same start again with its run id), waits for them
    and reads them (the run, its steps, events and stream, the listings by workflow and by status, a child run the
    flow function created), resumes a hook with a large payload, fails one, cancels a run and deletes the resumed
    one; a plain HTTP service
    uses the ``/v1/client`` endpoints. The TypeScript runtime (``packages/world-awsworld``) keeps its runs in the
    server: it creates one with a large input, records its events (a step with a large input and result, a hook, a
    wait, attributes, a batch), writes, closes and reads a stream, reads the run's steps, hooks and events by every
    key, queues a message for its app (``deliverTo``) and completes the run. Payloads are encrypted."""
    server = HttpWorld(WORLD_SERVER_URL, http=http)
    client = Client(server)
    esm = EventSourceMapping(local.world, flow_fn.invoke)
    assert (await http.get("/v1/info")).status_code == 200
    deployment = await server.get_deployment_id()
    assert await server.published.read() is not None

    # HttpClient: Python runs.
    blob = "h" * (20 * KIB)
    big = await client.options(run_id=f"trace-server-{secrets.token_hex(6)}").start(streams_and_large_values, blob)
    assert (await client.options(run_id=big.run_id).start(streams_and_large_values, blob)).run_id == big.run_id
    tokens = [f"trace-server-{purpose}-{secrets.token_hex(6)}"
              for purpose in ("resume", "fail", "cancel", "end", "plain")]
    hooked = [await client.start(app.plain_hook, token) for token in tokens[:4]]
    started = await http.post("/v1/client/start", json={"workflow": "deploy.plain_hook", "args": [tokens[4]]})
    assert started.status_code == 202, started.text
    plain = client.get_run(started.json()["runId"])
    family = await client.start(parent, "e")
    await esm.run_until(lambda: _hooks_exist(local.world, tokens), timeout=90)
    await esm.run_until(_all([big, family]), timeout=60)
    # A run another process created (the child the flow function started): its data key is unwrapped here.
    [child] = await family.children()
    assert await child.result(timeout=5) == 20 * KIB + 1
    assert await big.result(timeout=5) == 40 * KIB
    assert [chunk async for chunk in big.stream("progress")] == [f"line {i}\n".encode() for i in range(3)]
    assert (await big.get()).input is not None and await big.steps() and await big.events()
    assert big.run_id in [r.run_id for r in (await client.list_runs(workflow=streams_and_large_values)).data]
    await client.list_runs(status=["completed", "running"])
    await client.resume_hook(tokens[0], "p" * (20 * KIB))
    await client.fail_hook(tokens[1], "declined", code="DECLINED")
    await client.cancel(hooked[2].run_id, reason="trace")
    resumed = await http.post("/v1/client/hooks/resume", json={"token": tokens[4], "payload": "by http",
                                                               "idempotencyKey": "trace-server", "wait": 5})
    assert resumed.status_code == 200, resumed.text
    cancelled = await http.post(f"/v1/client/runs/{hooked[3].run_id}/cancel", json={"reason": "by http"})
    assert cancelled.status_code == 200, cancelled.text
    await esm.run_until(_all([*hooked, plain]), timeout=60)
    assert await plain.result(timeout=5) == "by http"
    assert await hooked[0].result(timeout=5) == "p" * (20 * KIB)
    with pytest.raises(WorkflowRunCancelledError, match="trace"):
        await hooked[2].result(timeout=5)
    assert await client.delete_run(hooked[0].run_id) is True  # DELETE /v1/runs/{run_id}

    # The TypeScript runtime's run: the server is its storage (nothing of it runs in the flow function).
    large = _bytes(b"t" * (20 * KIB))
    created = await server.events.create(None, {"eventType": "run_created", "specVersion": 5, "eventData": {
        "workflowName": "workflow//./app//order", "deploymentId": deployment, "input": large}})
    assert created.run is not None
    run_id = created.run.run_id
    step, hook, wait = (f"{kind}_{new_ulid()}" for kind in ("step", "hook", "wait"))  # (the runtime's ids)
    token = f"trace-server-ts-{secrets.token_hex(6)}"
    for event in ({"eventType": "run_started"},
                  {"eventType": "step_created", "correlationId": step, "eventData": {"stepName": "s", "input": large}},
                  {"eventType": "step_started", "correlationId": step},
                  {"eventType": "step_completed", "correlationId": step, "eventData": {"result": large}},
                  {"eventType": "hook_created", "correlationId": hook, "eventData": {"token": token}},
                  {"eventType": "wait_created", "correlationId": wait,
                   "eventData": {"resumeAt": "2099-01-01T00:00:00.000Z"}}):
        await server.events.create(run_id, {"specVersion": 5, **event})
    await server.runs.set_attributes(run_id, [{"key": "region", "value": "eu"}])
    await server.events.create_batch(run_id, [{"eventType": "wait_completed", "correlationId": wait}])
    await server.streams.write_multi(run_id, "default", [b"a" * (20 * KIB), b"b"])
    await server.streams.write(run_id, "default", b"c")
    await server.streams.close(run_id, "default")
    assert b"".join([chunk async for chunk in server.streams.get(run_id, "default")]) == b"a" * (20 * KIB) + b"bc"
    assert len((await server.streams.get_chunks(run_id, "default")).data) == 3
    assert (await server.streams.get_info(run_id, "default")).done
    assert await server.streams.list(run_id) == ["default"]
    assert (await server.steps.get(run_id, step)).output is not None and (await server.steps.list(run_id)).data
    assert (await server.hooks.get_by_token(token)).hook_id == hook
    assert (await http.get("/v1/hooks/by-token", params={"token": token})).status_code == 200
    assert (await server.hooks.get(hook, run_id=run_id)).token == token
    assert (await server.hooks.list(run_id)).data
    assert await server.hooks.resumed_by("trace-server-none") is None
    assert (await server.events.list_by_correlation_id(run_id, step)).data
    assert (await server.runs.get(run_id)).input is not None
    queued = await http.post("/v1/queue", json={"queueName": "__wkf_workflow_order", "message": {"runId": run_id},
                                                "deliverTo": "http://127.0.0.1:3000", "opts": {"delaySeconds": 900}})
    assert queued.status_code == 200, queued.text
    await push_large_messages(http, esm, run_id, deployment)
    await server.events.create(run_id, {"eventType": "run_completed", "specVersion": 5,
                                        "eventData": {"output": large}})
    assert (await server.runs.wait_for_terminal_status(run_id, timeout=5)).status == "completed"
    assert [e.event_type for e in (await server.events.list(run_id)).data][-1] == "run_completed"


async def push_large_messages(http: httpx.AsyncClient, esm: EventSourceMapping, run_id: str,
                              deployment: str) -> None:
    """Messages over the inline limit that the TypeScript runtime queues for its app (``deliverTo``): the server
    stores each payload in S3, and the flow function reads it back and POSTs it to the app. The runtime's workflow
    message with its run's input (a resilient start's ``runInput``) names its run, inside the push envelope
    (stored under the run's prefix); a message of the app's own names none (stored under ``queue/``)."""
    received: list[Any] = []

    async def flow_route(request: Request) -> JSONResponse:
        received.append(json.loads(await request.body()))
        return JSONResponse({"ok": True})

    named = {"runId": run_id, "runInput": {"input": _bytes(b"i" * (200 * KIB)), "deploymentId": deployment,
                                           "workflowName": "workflow//./app//order", "specVersion": 5}}
    unnamed = {"blob": "n" * (210 * KIB)}
    async with listening(Starlette(routes=[Route(FLOW_ROUTE, flow_route, methods=["POST"])])) as pushed_to:
        for message in (named, unnamed):
            queued = await http.post("/v1/queue", json={"queueName": "__wkf_workflow_order", "message": message,
                                                        "deliverTo": pushed_to.url})
            assert queued.status_code == 200, queued.text

        async def both_pushed() -> bool:
            return len(received) == 2

        await esm.run_until(both_pushed, timeout=60)
    assert sorted(received, key=lambda body: "runId" in body) == [unnamed, named]


# ------------------------------------------------------------------------------------------ the check


@pytest.fixture(scope="module")
async def traced(local: LocalAWS, flow_function: Function, webhook_function: Function,
                 world_server: tuple[httpx.AsyncClient, FunctionUrl, Trace]) -> AsyncIterator[dict[str, Trace]]:
    await run_workloads(local, flow_function, webhook_function)
    client_world = AWSWorld(local.world.config)  # a client's process: its own clients, the stack's resources
    client_trace = Trace(client_world)
    for client in await _open_clients(client_world):
        service = client.meta.service_model.service_id.hyphenize()
        client.meta.events.register(f"before-parameter-build.{service}", client_trace.record)
    operator_trace = Trace(AWSWorld(AWSConfig.from_env()))  # the stack the operator's environment names
    ui_world = traced_world(operator_trace)()
    try:
        await run_client_workload(local, Client(client_world), flow_function)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(aws_package, "AWSWorld", traced_world(operator_trace))  # what the CLI opens
            await run_operator_workload(local, flow_function, ui_world)
        server_http, _, server_trace = world_server
        await run_world_server_workload(local, server_http, flow_function)
        yield {"FlowFunctionRole": flow_function.trace, "WebhookFunctionRole": webhook_function.trace,
               "ClientPolicy": client_trace, "OperatorPolicy": operator_trace, "WorldServerFunctionRole": server_trace}
    finally:
        await client_world.close()
        await ui_world.close()
        await operator_trace.world.close()


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    from .test_template import ROOT, load

    return load(str(ROOT / "template.yaml"))


def test_every_request_was_seen_and_mapped(traced: dict[str, Trace]) -> None:
    for role, trace in traced.items():
        assert not trace.unmapped, f"{role}: map these operations to IAM actions in this test: {trace.unmapped}"
        # The same kinds of request (counts may differ by the calls a test made fail before they were sent).
        assert set(trace.operations) == set(trace.world.clients.stats.requests), role
        assert trace.operations, role


@pytest.mark.parametrize("role", ROLES)
def test_the_role_grants_every_action_its_handler_uses(traced: dict[str, Trace], template: dict[str, Any],
                                                        role: str) -> None:
    grants = granted(template, role)
    missing = {used for used in traced[role].grants if not any(covers(grant, used) for grant in grants)}
    assert not missing, f"{role} lacks {sorted(missing)}: its code would get AccessDenied in AWS"


@pytest.mark.parametrize("role", ROLES)
def test_the_role_grants_nothing_its_handler_does_not_use(traced: dict[str, Trace], template: dict[str, Any],
                                                          role: str) -> None:
    allowed = NOT_CALLED_BY_CODE[role]
    grants = granted(template, role)
    assert not set(allowed) - grants, f"{role}: NOT_CALLED_BY_CODE lists grants the template no longer has"
    surplus = {grant for grant in grants - set(allowed) if not any(covers(grant, used) for used in traced[role].grants)}
    assert not surplus, (f"{role} grants {sorted(surplus)}, which no traced code path uses: remove them from "
                         "template.yaml, or list them in NOT_CALLED_BY_CODE with the reason")


@pytest.mark.parametrize("role", ROLES)
def test_a_parameter_adds_exactly_the_grants_it_is_for(template: dict[str, Any], role: str) -> None:
    """The grants no code path uses that exist for a parameter (X-Ray's, the VPC's network interfaces) are absent
    with the defaults and, with the parameter set, are all the parameter adds to the roles that list them."""
    exists = ROLE_EXISTS_WITH.get(role, {})
    unswitched = granted(resolved(template, **exists), role)
    for parameter, (values, grants) in SWITCHED_ON_BY.items():
        assert not unswitched & grants, f"{role} grants {sorted(unswitched & grants)} without {parameter}"
        switched = granted(resolved(template, **exists, **values), role)
        assert switched - unswitched == grants & set(NOT_CALLED_BY_CODE[role]), (role, parameter)


def test_the_world_servers_workload_calls_every_route_it_serves(
        traced: dict[str, Trace], world_server: tuple[httpx.AsyncClient, FunctionUrl, Trace]) -> None:
    """A guard on the World server's workload: each route of the app (``_http/app.py``) was requested, so a route
    added to the server is traced (or this fails, naming it)."""
    from starlette.routing import Match

    from awsworld._http.app import create_app
    from awsworld._http.auth import Auth
    from awsworld._memory import MemoryWorld

    _, url, _ = world_server
    routes = [r for r in create_app(MemoryWorld(), auth=Auth("aws-iam")).routes if isinstance(r, Route)]

    def requested(route: Route) -> bool:
        return any(route.matches({"type": "http", "method": method, "path": path})[0] == Match.FULL
                   for method, path in url.requests)

    missed = [f"{sorted(route.methods or [])} {route.path}" for route in routes if not requested(route)]
    assert routes and not missed, f"the World server's workload requests none of {missed}"


def test_the_trace_covers_what_each_function_is_for(traced: dict[str, Trace]) -> None:
    """A guard on the workloads themselves: if a path stops being exercised, the grants above prove less."""
    flow_grants = traced["FlowFunctionRole"].grants
    assert {("sqs:SendMessage", "FlowQueue"), ("sqs:SendMessage", "DeadLetterQueue"),
            ("lambda:InvokeFunction", "FlowFunction:*"),
            ("sqs:ChangeMessageVisibility", "FlowQueue"), ("s3:PutObject", "runs/*"), ("s3:GetObject", "runs/*"),
            ("s3:GetObject", "queue/*"),
            ("dynamodb:ConditionCheckItem", "table"), ("kms:GenerateDataKey", "PayloadKmsKeyArn"),
            ("kms:Decrypt", "PayloadKmsKeyArn")} <= flow_grants
    webhook_grants = traced["WebhookFunctionRole"].grants
    assert {("sqs:SendMessage", "FlowQueue"), ("s3:PutObject", "runs/*"), ("s3:DeleteObject", "runs/*"),
            ("s3:GetObject", "runs/*"), ("dynamodb:PutItem", "table"),
            ("kms:Decrypt", "PayloadKmsKeyArn")} <= webhook_grants
    server_grants = traced["WorldServerFunctionRole"].grants
    assert {("sqs:SendMessage", "FlowQueue"), ("s3:PutObject", "runs/*"), ("s3:PutObjectTagging", "runs/*"),
            ("s3:GetObject", "runs/*"), ("s3:DeleteObject", "runs/*"), ("dynamodb:Query", "index/byWorkflow"),
            ("dynamodb:Query", "index/byStatus"), ("dynamodb:PutItem", "table"), ("s3:PutObject", "queue/*"),
            ("kms:GenerateDataKey", "PayloadKmsKeyArn"), ("kms:Decrypt", "PayloadKmsKeyArn")} <= server_grants
    client_grants = traced["ClientPolicy"].grants
    assert {("sqs:SendMessage", "FlowQueue"), ("s3:PutObject", "runs/*"), ("s3:PutObjectTagging", "runs/*"),
            ("s3:GetObject", "runs/*"), ("s3:DeleteObject", "runs/*"), ("dynamodb:Query", "index/byWorkflow"),
            ("dynamodb:Query", "index/byStatus"), ("dynamodb:PutItem", "table"),
            ("kms:GenerateDataKey", "PayloadKmsKeyArn"), ("kms:Decrypt", "PayloadKmsKeyArn")} <= client_grants
    operator_grants = traced["OperatorPolicy"].grants
    assert {("sqs:ReceiveMessage", "DeadLetterQueue"), ("sqs:ChangeMessageVisibility", "DeadLetterQueue"),
            ("sqs:DeleteMessage", "DeadLetterQueue"), ("sqs:GetQueueAttributes", "FlowQueue"),
            ("sqs:SendMessage", "FlowQueue"), ("lambda:DeleteFunction", "FlowFunction:*"),
            ("dynamodb:Query", "index/byWorkflow"), ("dynamodb:Query", "index/byStatus"),
            ("s3:DeleteObject", "runs/*"), ("kms:GenerateDataKey", "PayloadKmsKeyArn")} <= operator_grants

