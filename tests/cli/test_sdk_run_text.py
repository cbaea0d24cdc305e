"""What the CLI shows of a run of the Workflow SDK's TypeScript runtime (``world/sdk_values.py``): its errors and
values are that runtime's bytes, and ``describe`` printed ``error     None:`` and ``an error serialized by another
runtime (825 bytes)`` for a step's ``FatalError`` (the app's message and stack lost to whoever watched the run),
``events``, ``result`` and the UI's run page the base64 of its values. The bytes in ``data/sdk_run_bytes.json`` are what
``@workflow/core`` 5.0.0-beta.35 wrote through world-awsworld into ``awsworld dev``: a step's ``FatalError``
(``devl``), a step's first retry (a plain ``Error``), the run's failure after its retries ran out (``gzip``), a
run's input, and two outputs, one of 100 KiB (``gzip``, above the 16 KiB a value stays inline)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from awsworld._memory import MemoryWorld
from awsworld._timeline import print_timeline, read_events, timeline_rows
from awsworld.cli.describe import _print_description, describe_document
from awsworld.client.client import Client
from awsworld.ui.pages import event_rows
from awsworld.world.entities import ErrorBytes
from awsworld.world.sdk_values import UnreadableError, read_sdk_bytes, readable_value

BYTES: dict[str, dict[str, str]] = json.loads((Path(__file__).parent / "data" / "sdk_run_bytes.json").read_text())
CONTEXT = {"traceCarrier": {}, "workflowCoreVersion": "5.0.0-beta.35", "features": {"encryption": False}}
STEP = "step_01K0000000000000000000000S"


async def _ts_run(world: MemoryWorld, run_id: str, workflow: str, input: dict[str, str]) -> None:
    await world.events.create(run_id, {"eventType": "run_created", "specVersion": 5, "eventData": {
        "workflowName": workflow, "deploymentId": "d", "input": input, "executionContext": CONTEXT}})
    await world.events.create(run_id, {"eventType": "run_started", "specVersion": 5})


async def _event(world: MemoryWorld, run_id: str, event_type: str, data: dict[str, Any] | None = None,
                 correlation: str | None = STEP) -> None:
    await world.events.create(run_id, {"eventType": event_type, "correlationId": correlation, "specVersion": 5,
                                       **({"eventData": data} if data is not None else {})})


async def test_describe_and_events_show_a_typescript_runs_errors_with_the_apps_message_and_stack(
        capsys: pytest.CaptureFixture[str]) -> None:
    world = MemoryWorld()
    run_id = "wrun_01K00000000000000000000001"
    await _ts_run(world, run_id, "workflow//./workflows/app//failing", BYTES["retries_input"])
    step = "step//./workflows/app//flaky"
    await _event(world, run_id, "step_created", {"stepName": step, "input": BYTES["retries_input"]})
    await _event(world, run_id, "step_started")
    await _event(world, run_id, "step_retrying", {"error": BYTES["retries_first_retry"]})
    await _event(world, run_id, "step_started")
    await _event(world, run_id, "step_failed", {"error": BYTES["retries_run_failed"]})
    await _event(world, run_id, "run_failed", {"error": BYTES["retries_run_failed"], "errorCode": "USER_ERROR"},
                 correlation=None)
    document = await describe_document(Client(world), run_id)
    _print_description(document)
    await print_timeline(world, run_id, full=True)  # (values whole: not cut to the terminal's width)
    text = capsys.readouterr().out
    said = f'FatalError: Step "{step}" failed after 3 retries: the payments service said no (attempt 4)'
    assert f"error     {said}\n" in text, text
    assert "traceback\n  Error: the payments service said no (attempt 4)\n      at flaky (file:///" in text, text
    assert "None:" not in text and "serialized by another runtime" not in text, text
    assert "error Error: the payments service said no (attempt 1)" in text, text  # the retry's row
    assert "retry at ?" not in text, text  # (its retry has no retryAfter: the runtime's delayed message is it)
    assert 'input ["payments"]' in text, text
    assert document["errorDetails"]["name"] == "FatalError" and said.endswith(document["errorDetails"]["message"])


async def test_a_steps_fatal_error_reads_by_its_class_and_an_unread_form_stays_sized() -> None:
    fatal = ErrorBytes.model_validate(BYTES["fatal_step_failed"])
    fields = fatal.read_fields()
    assert fields is not None and (fields["name"], fields["message"]) == ("FatalError", "fatal: billing is invalid")
    assert fields["stack"].startswith("FatalError: fatal: billing is invalid\n    at fatal (")
    encrypted = ErrorBytes.model_validate({"__type": "Uint8Array", "data": base64.b64encode(b"encr\x00\x01").decode()})
    assert encrypted.read_fields() is None  # left unread: describe shows its size, as before
    with pytest.raises(UnreadableError):
        read_sdk_bytes(b"gzip" + b"\x1f\x8b not gzip")


async def test_events_show_a_typescript_runs_large_output_read_and_json_keeps_the_bytes(
        capsys: pytest.CaptureFixture[str]) -> None:
    value = readable_value(BYTES["big_output"])
    assert value["size"] == 100 * 1024 and value["data"] == "x" * 100 * 1024 + "END"  # whole, from 181 bytes
    assert readable_value(BYTES["hello_output"]) == {"greeting": "hello ts", "sum": 3, "more": 13}
    world = MemoryWorld()
    run_id = "wrun_01K00000000000000000000002"
    await _ts_run(world, run_id, "workflow//./workflows/app//hello", BYTES["retries_input"])
    await _event(world, run_id, "run_completed", {"output": BYTES["hello_output"]}, correlation=None)
    await print_timeline(world, run_id, full=True)
    text = capsys.readouterr().out
    assert 'output {"greeting":"hello ts","sum":3,"more":13}' in text, text
    page = event_rows(run_id, timeline_rows(await read_events(world, run_id)))  # the UI's run page, likewise
    shown = "{&quot;greeting&quot;:&quot;hello ts&quot;,&quot;sum&quot;:3,&quot;more&quot;:13}"
    assert f"<code>{shown}</code>" in page, page
    run = await world.runs.get(run_id)
    assert run.output == BYTES["hello_output"]  # stored as the runtime wrote it
