"""Fixtures for the deploy tests: one ``LocalAWS`` per module and backend (``[moto]``, and ``[localstack]``:
DynamoDB Local with LocalStack's SQS, S3 and KMS; no local poller: the tests are the event source), the
process environment a deployed function gets (resource names from the template's variables, the emulators'
endpoints, dummy credentials), and the real entry points ``handlers/flow.py`` and ``handlers/webhook.py`` loaded
from their files.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from awsworld.lambda_host.container import default_container
from awsworld.local import DUMMY_CREDENTIALS, LocalAWS
from conftest import LOCALSTACK, local_aws_options  # tests/conftest.py (tests/ is on sys.path)

from . import app
from .lambda_env import REGION, EventSourceMapping, lambda_root_logger

ROOT = Path(__file__).resolve().parents[2]
# The handlers run on both SQS/S3 engines: what a deployed function meets is AWS, not one emulator's reading.
HANDLER_BACKENDS = ["moto", LOCALSTACK]


def load_entry_point(name: str) -> ModuleType:
    """Import ``handlers/<name>.py`` from its file, as Lambda imports the handler module."""
    spec = importlib.util.spec_from_file_location(f"awsworld_test_handlers_{name}", ROOT / "handlers" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Handlers:
    flow: Callable[[dict[str, Any], Any], dict[str, Any]]
    webhook: Callable[[dict[str, Any], Any], dict[str, Any]]


@pytest.fixture(scope="module", params=HANDLER_BACKENDS, ids=HANDLER_BACKENDS)
def local_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The session's servers for this module's backend (a sync fixture: it may start them)."""
    return local_aws_options(request, request.param)


@pytest.fixture(scope="module")
async def local(local_options: dict[str, Any]) -> AsyncIterator[LocalAWS]:
    async with LocalAWS(**local_options, run_workflows=False) as aws:
        yield aws


@pytest.fixture(scope="module")
def lambda_environment(local: LocalAWS) -> Iterator[dict[str, str]]:
    """The variables template.yaml gives the functions, pointed at this module's emulated resources."""
    config = local.config
    assert config.queue_url and config.dlq_url and config.endpoint_url
    env = {
        "AWSWORLD_TABLE": config.table_name,
        "AWSWORLD_BUCKET": config.bucket_name,
        "AWSWORLD_QUEUE_URL": config.queue_url,
        "AWSWORLD_DLQ_URL": config.dlq_url,
        "AWSWORLD_MODULES": app.__name__,
        "AWS_REGION": REGION,
        "AWS_ENDPOINT_URL": config.endpoint_url,
        "AWS_ACCESS_KEY_ID": str(DUMMY_CREDENTIALS["aws_access_key_id"]),
        "AWS_SECRET_ACCESS_KEY": str(DUMMY_CREDENTIALS["aws_secret_access_key"]),
        "AWSWORLD_KMS_KEY_ID": config.kms_key_id or "",  # the template's PayloadKmsKeyArn (empty: off)
    }
    if config.dynamodb_endpoint_url and config.dynamodb_endpoint_url != config.endpoint_url:
        env["AWS_ENDPOINT_URL_DYNAMODB"] = config.dynamodb_endpoint_url
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
        patch.delenv("AWSWORLD_FLOW_BUDGET_MS", raising=False)
        patch.delenv("AWS_SESSION_TOKEN", raising=False)
        patch.delenv("AWS_PROFILE", raising=False)
        for name, value in env.items():
            patch.setenv(name, value)
        yield env


@pytest.fixture(scope="module")
async def handlers(lambda_environment: dict[str, str]) -> AsyncIterator[Handlers]:
    """The entry points, on a default container rebuilt from this module's environment (a cold start)."""
    container = default_container()
    await asyncio.to_thread(container.reset)
    with lambda_root_logger():  # set up by the runtime before it imports the handler
        yield Handlers(load_entry_point("flow").handler, load_entry_point("webhook").handler)
    await asyncio.to_thread(container.reset)


@pytest.fixture
def esm(local: LocalAWS, handlers: Handlers) -> EventSourceMapping:
    return EventSourceMapping(local.world, handlers.flow)


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects among captured stdout lines (Powertools logs and EMF metric blobs)."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def metric_values(lines: list[dict[str, Any]], name: str) -> list[float]:
    """Every value EMF blobs reported for metric ``name``."""
    values: list[float] = []
    for blob in lines:
        if "_aws" not in blob or name not in blob:
            continue
        value = blob[name]
        values.extend(value if isinstance(value, list) else [value])
    return values
