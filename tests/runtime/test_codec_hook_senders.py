"""What a sender may send a codec hook (``create_hook(codec=...)``), on the in-memory World, on LocalAWS (moto) and
over HTTP (``HttpClient`` on ``awsworld serve --world memory`` as a process, which runs this module's workflows).

The hook's ``hook_created`` records ``payloadCodec`` and the World keeps it (``Hook.payload_codec``), so
``resume_hook`` refuses a payload that is not the codec's text or bytes (a dict, say) with ``CodecPayloadError``
before anything is recorded: recorded, the codec would refuse it at the workflow's await and fail the run. The
run keeps waiting and takes the codec's text after; a failure (``fail_hook``) and a heartbeat reach a codec hook as
any other; a plain hook still takes a dict; and a run whose ``hook_created`` was recorded without the mark (before
it existed) replays and resumes as before. (``awsworld resume`` sending a codec hook's PAYLOAD as its text:
``tests/cli/test_cli.py``.)"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from awsworld import HookFailedError, PydanticCodec, create_hook, workflow
from awsworld._engine.ops import PAYLOAD_CODEC_FIELD
from awsworld._worker import declarations
from awsworld.world import CodecPayloadError

from .conftest import AWS, E2E, HTTP_MEMORY, MEMORY, OVER_HTTP
from .values_support import INLINE

pytestmark = pytest.mark.parametrize("e2e_backend", [MEMORY, AWS, HTTP_MEMORY], scope="module")


class Order(BaseModel):
    sku: str
    quantity: int
    note: str = ""


@workflow(name="codec_senders.order")
async def take_order(token: str) -> dict[str, Any]:
    hook = create_hook(token, codec=PydanticCodec(Order))
    try:
        order = await hook
    except HookFailedError as error:
        return {"failed": error.message, "code": error.code}
    return {"sku": order.sku, "quantity": order.quantity, "note_length": len(order.note), "type": type(order).__name__}


@workflow(name="codec_senders.plain")
async def take_anything(token: str) -> object:
    return await create_hook(token)


def new_token(kind: str) -> str:
    return f"{kind}:{uuid.uuid4().hex}"


async def test_a_dict_for_a_codec_hook_is_refused_before_it_is_recorded(e2e: E2E, request: pytest.FixtureRequest
                                                                       ) -> None:
    token = new_token("order")
    run = await e2e.start(take_order, token)
    await e2e.hook_ready(token, run)
    hook = await e2e.world.hooks.get_by_token(token)
    assert hook.payload_codec is True  # kept by the World (and carried over HTTP)
    before = await run.events()
    created = next(e for e in before if e.event_type == "hook_created")
    assert created.event_data[PAYLOAD_CODEC_FIELD] is True

    for payload, held in (({"sku": "tea", "quantity": 1}, "dict"), (7, "int"), (["tea"], "list"), (None, "NoneType")):
        with pytest.raises(CodecPayloadError) as refused:
            await e2e.client.resume_hook(token, payload)
        assert refused.value.status == 400 and refused.value.field == "payload"
        message = str(refused.value)
        assert f"not a {held}:" in message and "order.model_dump_json()" in message and token not in message
    with pytest.raises(CodecPayloadError):  # a keyed resume too: its key is not spent on a refused payload
        await e2e.client.resume_hook(token, {"sku": "tea", "quantity": 1}, idempotency_key="order-1")
    if e2e.backend in OVER_HTTP:  # serve's resume route answers the same refusal as a 400
        async with httpx.AsyncClient() as http:
            answer = await http.post(f"{request.getfixturevalue('served_url')}/v1/client/hooks/resume",
                                     json={"token": token, "payload": {"sku": "tea", "quantity": 1}})
        assert answer.status_code == 400, answer.text
        assert (answer.json()["error"]["code"], answer.json()["error"]["type"]) == ("codec-payload",
                                                                                    "CodecPayloadError")
    assert await run.events() == before  # nothing recorded
    assert await run.status() == "running"

    beat = await e2e.client.heartbeat_hook(token)  # a heartbeat is no payload: a codec hook takes it
    assert beat.event_type == "hook_received"
    note = "n" * (INLINE + 1024)  # above the inline limit: in S3 on AWS
    await e2e.client.resume_hook(token, Order(sku="tea", quantity=1, note=note).model_dump_json(),
                                 idempotency_key="order-1")
    assert await run.result(timeout=60) == {"sku": "tea", "quantity": 1, "note_length": len(note), "type": "Order"}


async def test_a_codec_hook_takes_its_codecs_bytes_and_a_failure(e2e: E2E) -> None:
    token = new_token("bytes")
    run = await e2e.start(take_order, token)
    await e2e.hook_ready(token, run)
    await e2e.client.resume_hook(token, b'{"sku": "cup", "quantity": 3}')
    assert (await run.result(timeout=60))["quantity"] == 3

    token = new_token("failed")
    run = await e2e.start(take_order, token)
    await e2e.hook_ready(token, run)
    assert (await e2e.world.hooks.get_by_token(token)).payload_codec is True
    await e2e.client.fail_hook(token, "out of stock", code="NO_STOCK")
    assert await run.result(timeout=60) == {"failed": "out of stock", "code": "NO_STOCK"}


async def test_a_plain_hook_still_takes_a_dict(e2e: E2E) -> None:
    token = new_token("plain")
    run = await e2e.start(take_anything, token)
    await e2e.hook_ready(token, run)
    hook = await e2e.world.hooks.get_by_token(token)
    assert hook.payload_codec is False
    created = next(e for e in await run.events() if e.event_type == "hook_created")
    assert PAYLOAD_CODEC_FIELD not in created.event_data  # a plain hook's event does not grow
    await e2e.client.resume_hook(token, {"sku": "tea", "quantity": 1})
    assert await run.result(timeout=60) == {"sku": "tea", "quantity": 1}


async def test_a_codec_hook_recorded_without_the_mark_resumes_as_before(e2e: E2E,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose ``hook_created`` was written before the mark existed: the World reads its hook as no codec's,
    and the run replays (the mark is never compared) and takes the codec's text as it did."""
    if e2e.backend in OVER_HTTP:
        pytest.skip("the flow runs in the server's process, where this test cannot write the old event")
    named = declarations.named

    def as_before(op: Any, data: dict[str, Any]) -> dict[str, Any]:
        written = named(op, data)
        written.pop(PAYLOAD_CODEC_FIELD, None)
        return written

    monkeypatch.setattr(declarations, "named", as_before)
    token = new_token("old")
    run = await e2e.start(take_order, token)
    await e2e.hook_ready(token, run)
    monkeypatch.undo()  # the rest runs on today's code
    created = next(e for e in await run.events() if e.event_type == "hook_created")
    assert PAYLOAD_CODEC_FIELD not in created.event_data
    assert (await e2e.world.hooks.get_by_token(token)).payload_codec is False
    await e2e.client.resume_hook(token, Order(sku="mug", quantity=2).model_dump_json())
    assert await run.result(timeout=60) == {"sku": "mug", "quantity": 2, "note_length": 0, "type": "Order"}
