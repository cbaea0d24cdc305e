"""Per-run payload encryption on the emulator's KMS: one workflow carries a marker through every kind of user
value (run input inline and in S3, step arguments and results, a step's error, a hook's metadata and payload,
stream chunks, the run's output), then every DynamoDB item (event blocks decompressed) and every S3 object is
searched for it. With encryption on, the marker is nowhere; with it off, the same search finds it (so the
search can fail). Reads through the World, the Client and the CLI still see every value. Every test runs on
moto's KMS (``[moto]``) and on LocalStack's own KMS, SQS and S3 beside DynamoDB Local (``[localstack]``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import sys
import zlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from awsworld import ChildWorkflowError, Client, FatalError, create_hook, get_writable, step, workflow
from awsworld._worker.dispatch import Worker
from awsworld.aws import AWSWorld
from awsworld.aws.clients import AWSClients
from awsworld.aws.encryption.cipher import RunCipher, UnreadableValueError
from awsworld.aws.encryption.run_keys import DATA_KEY_SK, RUN_CONTEXT_KEY, TABLE_CONTEXT_KEY, EncryptionKeyError
from awsworld.local import LocalAWS
from awsworld.local.poller import RECEIVE_WAIT_SECONDS, LocalPoller
from awsworld.world.errors import RunNotFoundError
from conftest import LOCALSTACK, local_aws_options  # tests/conftest.py (tests/ is on sys.path)

from .conftest import holder_of_hook

MARKER = "plaintext-marker-7f3a"
BIG = MARKER * 2000  # 40 KB: past the inline limit, so the input goes to S3


@step(name="tests.encryption.shout")
async def shout(text: str) -> str:
    writer = get_writable("log")
    await writer.write(f"chunk {text}".encode())
    await writer.write(f"chunk two {MARKER}".encode())
    return text.upper() + MARKER


@step(name="tests.encryption.refuse")
async def refuse(text: str) -> None:
    raise FatalError(f"refused {text}")


@workflow(name="tests.encryption.everything")
async def everything(small: str, big: str) -> dict[str, Any]:
    loud = await shout(small)
    try:
        await refuse(small)
    except Exception as error:  # the step's failure (its message carries the marker) is recorded, then caught
        caught = str(error)
    else:
        caught = ""
    # A token is a lookup key, stored as given: it carries no marker.
    hook = create_hook(token=f"enc-{small.split('-')[0]}-{len(big)}", metadata={"note": MARKER})
    payload = await hook
    return {"loud": loud, "caught": caught, "payload": payload, "big": len(big), "echo": MARKER}


@workflow(name="tests.encryption.echo")
async def echo(text: str) -> str:
    return text + MARKER


@workflow(name="tests.encryption.fails")
async def fails(text: str) -> None:
    await refuse(text)


@workflow(name="tests.encryption.waits")
async def waits(token: str) -> object:
    async with create_hook(token) as hook:
        return await hook


KMS_BACKENDS = ["moto", LOCALSTACK]


@pytest.fixture(scope="module", params=KMS_BACKENDS, ids=KMS_BACKENDS)
def servers(request: pytest.FixtureRequest) -> dict[str, Any]:
    return local_aws_options(request, request.param)


@pytest.fixture(scope="module")
async def encrypted(servers: dict[str, Any]) -> AsyncIterator[LocalAWS]:
    async with LocalAWS(**servers, encrypt_payloads=True) as aws:
        yield aws


@pytest.fixture(scope="module")
async def plain(servers: dict[str, Any]) -> AsyncIterator[LocalAWS]:
    async with LocalAWS(**servers) as aws:
        yield aws


async def _run_everything(local: LocalAWS, tag: str) -> tuple[str, dict[str, Any]]:
    assert local.client is not None
    run = await local.client.start(everything, f"{tag}-{MARKER}", BIG)
    token = f"enc-{tag}-{len(BIG)}"
    await run.wait_for_hook(token)
    await local.client.resume_hook(token, {"reply": MARKER})
    result = await run.result(timeout=60)
    return run.run_id, result


async def _stored_text(local: LocalAWS) -> tuple[list[str], list[bytes]]:
    """Every DynamoDB item of the World's table as text (event blocks decompressed), every S3 object's bytes."""
    config = local.config
    items: list[str] = []
    objects: list[bytes] = []
    aws = AWSClients(config)  # clients of their own, counted by no World
    try:
        ddb = await aws.dynamodb()
        async for page in ddb.get_paginator("scan").paginate(TableName=config.table_name):
            for item in page["Items"]:
                parts = [json.dumps({k: v for k, v in item.items() if "B" not in v})]
                for value in item.values():
                    if "B" in value:
                        raw = bytes(value["B"])
                        with contextlib.suppress(zlib.error):
                            raw = zlib.decompress(raw)
                        parts.append(raw.decode("utf-8", "replace"))
                items.append("\n".join(parts))
        s3 = await aws.s3()
        async for page in s3.get_paginator("list_objects_v2").paginate(Bucket=config.bucket_name):
            for entry in page.get("Contents", []):
                got = await s3.get_object(Bucket=config.bucket_name, Key=entry["Key"])
                async with got["Body"] as body:
                    objects.append(await body.read())
    finally:
        await aws.close()
    return items, objects


def _check_result(result: dict[str, Any], tag: str) -> None:
    caught = f"step 'tests.encryption.refuse' failed: FatalError: refused {tag}-{MARKER}"  # str(StepError)
    assert result == {"loud": f"{tag}-{MARKER}".upper() + MARKER, "caught": caught,
                      "payload": {"reply": MARKER}, "big": len(BIG), "echo": MARKER}


async def test_no_plaintext_payload_anywhere_in_the_table_or_bucket(encrypted: LocalAWS) -> None:
    run_id, result = await _run_everything(encrypted, "sealed")
    _check_result(result, "sealed")
    items, objects = await _stored_text(encrypted)
    assert any(DATA_KEY_SK in text for text in items)
    assert any(b"chunk" not in o and len(o) > len(BIG) for o in objects), "the large input is in S3, sealed"
    assert [t[max(0, t.find(MARKER) - 300):t.find(MARKER) + 50] for t in items if MARKER in t] == []
    assert [o[:80] for o in objects if MARKER.encode() in o] == []
    # Reads still see every value: the World's events, the stream, the hook's metadata.
    world = encrypted.world
    page = await world.events.list(run_id, resolve_data="all")
    assert sum(json.dumps(e.event_data).count(MARKER) for e in page.data) >= 8
    assert encrypted.client is not None
    chunks = [c async for c in encrypted.client.get_run(run_id).stream("log")]
    assert chunks == [f"chunk sealed-{MARKER}".encode(), f"chunk two {MARKER}".encode()]


async def test_the_same_search_finds_the_marker_without_encryption(plain: LocalAWS) -> None:
    _, result = await _run_everything(plain, "open")
    _check_result(result, "open")
    items, objects = await _stored_text(plain)
    assert not any(DATA_KEY_SK in text for text in items)
    assert any(MARKER in t for t in items) and any(MARKER.encode() in o for o in objects)


async def test_another_process_unwraps_a_runs_key_once(encrypted: LocalAWS) -> None:
    """A fresh World (a cold container) reads a run: one GetItem of the key item and one KMS Decrypt for the
    whole run, whatever it reads; the creating World made one data key and never unwrapped it."""
    world = encrypted.world
    before = world.stats.snapshot()
    run_id, _ = await _run_everything(encrypted, "count")
    made = world.stats.snapshot() - before
    assert made.requests["kms.GenerateDataKey"] == 1
    assert made.requests["kms.Decrypt"] == 0
    cold = AWSWorld(encrypted.config)
    try:
        await asyncio.gather(cold.runs.get(run_id, resolve_data="all"), cold.events.list(run_id, resolve_data="all"),
                             cold.steps.list(run_id, resolve_data="all"))
        await cold.events.list(run_id, resolve_data="all")
        assert cold.stats.requests["kms.Decrypt"] == 1
        assert cold.stats.requests["kms.GenerateDataKey"] == 0
    finally:
        await cold.close()
    # A process that reads the run first (as every flow delivery does) has the wrapped key from that read.
    cold = AWSWorld(encrypted.config)
    got: list[str] = []
    cold.clients.register_handler("before-parameter-build.dynamodb.GetItem",
                                  lambda params, **_: got.append(params["Key"]["sk"]["S"]))
    try:
        await cold.runs.get(run_id, resolve_data="all")
        await cold.events.list(run_id, resolve_data="all")
        assert cold.stats.requests["kms.Decrypt"] == 1
        assert DATA_KEY_SK not in got
    finally:
        await cold.close()


async def test_racing_idempotent_starts_share_one_data_key(encrypted: LocalAWS) -> None:
    """Two clients start the same run id at once, each with a cold key cache: both may make a data key, only
    one is kept, and the run's values open with it whichever client wrote them."""
    worlds = [AWSWorld(encrypted.config) for _ in range(2)]
    try:
        clients = [Client(w) for w in worlds]
        run_id = "racing-start-1"
        starts = [c.options(run_id=run_id).start(everything, f"race-{MARKER}", "x") for c in clients]
        runs = await asyncio.gather(*starts)
        assert {r.run_id for r in runs} == {run_id}
        token = "enc-race-1"
        await runs[0].wait_for_hook(token)
        await clients[1].resume_hook(token, {"reply": MARKER})
        result = await runs[1].result(timeout=60)
        assert result["payload"] == {"reply": MARKER}
    finally:
        for w in worlds:
            await w.close()


async def test_runs_from_before_encryption_stay_plain_and_encrypted_runs_stay_readable_after(
        encrypted: LocalAWS) -> None:
    """Turning encryption on leaves older runs in plain text (no key item: nothing to seal with); turning it
    off still reads encrypted runs (a sealed value's run has the key item that unwraps it)."""
    off = AWSWorld(dataclasses.replace(encrypted.config, kms_key_id=None))
    try:
        older = await Client(off).start(everything, f"older-{MARKER}", "x")
        items, _ = await _stored_text(encrypted)
        assert any(MARKER in t and f"older-{MARKER}" in t for t in items)  # stored in plain text
        assert encrypted.client is not None
        token = "enc-older-1"
        await encrypted.client.get_run(older.run_id).wait_for_hook(token)
        await encrypted.client.resume_hook(token, {"reply": "plain"})
        assert (await encrypted.client.get_run(older.run_id).result(timeout=60))["payload"] == {"reply": "plain"}
        sealed_run_id, _ = await _run_everything(encrypted, "later")
        view = await off.runs.get(sealed_run_id, resolve_data="all")
        assert view.output is not None and view.output["echo"] == MARKER
    finally:
        await off.close()


def test_a_sealed_value_opens_only_in_its_own_run_and_scope() -> None:
    key = os.urandom(32)
    sealed = RunCipher("run-a", key).seal(b"secret")
    assert RunCipher("run-a", key).open(sealed) == b"secret"
    with pytest.raises(UnreadableValueError):
        RunCipher("run-b", key).open(sealed)  # same key, another run: refused
    with pytest.raises(UnreadableValueError):
        RunCipher("run-a", key).open(sealed, "stream:log")
    tampered = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(UnreadableValueError):
        RunCipher("run-a", key).open(tampered)


async def test_a_missing_key_refuses_new_runs_with_a_clear_error(encrypted: LocalAWS) -> None:
    """(moto does not enforce a disabled key's state, so the refusal comes from a key that does not exist.)"""
    gone = "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000"
    world = AWSWorld(dataclasses.replace(encrypted.config, kms_key_id=gone))
    try:
        with pytest.raises(EncryptionKeyError, match="names no KMS key"):
            await Client(world).options(run_id="never-created").start(everything, "x", "y")
        with pytest.raises(RunNotFoundError):
            await world.runs.get("never-created")  # nothing was written
    finally:
        await world.close()


async def test_a_runs_data_key_is_bound_to_its_run_and_table(encrypted: LocalAWS) -> None:
    """Each run's data key is made under an encryption context naming its table and run: KMS's ``Decrypt``
    fails unless the context matches the one used to encrypt (AWS: "encryption context"), so a wrapped key
    copied to another run's item does not open there. LocalStack's KMS does not check the context, so this runs
    where KMS does (moto's)."""
    if encrypted.sqs_s3 == "localstack":
        pytest.skip("LocalStack's KMS does not check the encryption context on Decrypt (AWS and moto do)")
    world = encrypted.world
    run_id = f"wrun_context_{os.urandom(4).hex()}"
    await world.clients.keys.create(run_id, 3600)
    ddb = await world.clients.dynamodb()
    item = (await ddb.get_item(TableName=world.config.table_name, ConsistentRead=True,
                               Key={"pk": {"S": f"RUN#{run_id}"}, "sk": {"S": DATA_KEY_SK}}))["Item"]
    wrapped = bytes(item["dk"]["B"])
    kms = await world.clients.kms()
    own = {TABLE_CONTEXT_KEY: world.config.table_name, RUN_CONTEXT_KEY: run_id}
    assert len((await kms.decrypt(CiphertextBlob=wrapped, EncryptionContext=own))["Plaintext"]) == 32
    for other in ({**own, RUN_CONTEXT_KEY: "wrun_someone_else"}, {**own, TABLE_CONTEXT_KEY: "another-table"}):
        with pytest.raises(ClientError) as refused:
            await kms.decrypt(CiphertextBlob=wrapped, EncryptionContext=other)
        assert refused.value.response["Error"]["Code"] == "InvalidCiphertextException"


async def test_a_disabled_key_refuses_new_runs_with_a_clear_error(encrypted: LocalAWS) -> None:
    """AWS refuses every cryptographic operation under a disabled key (``DisabledException``, KMS's "key states"
    table): a new run is refused before anything is written, with the fix in the message. moto's KMS ignores
    the key state, so this runs where KMS enforces it (LocalStack's)."""
    if encrypted.sqs_s3 == "moto":
        pytest.skip("moto's KMS does not enforce a disabled key's state (AWS and LocalStack do)")
    kms = await encrypted.world.clients.kms()
    key = (await kms.create_key(Description="awsworld disabled-key test"))["KeyMetadata"]["Arn"]
    await kms.disable_key(KeyId=key)
    world = AWSWorld(dataclasses.replace(encrypted.config, kms_key_id=key))
    try:
        disabled = r"the KMS key AWSWORLD_KMS_KEY_ID \(arn:[^)]*\) is disabled: enable it"
        with pytest.raises(EncryptionKeyError, match=disabled):
            await Client(world).options(run_id="never-created-disabled").start(everything, "x", "y")
        with pytest.raises(RunNotFoundError):
            await world.runs.get("never-created-disabled")  # nothing was written
    finally:
        await world.close()


def _cli_env(config: Any, kms_key_id: str | None) -> dict[str, str]:
    """The environment an operator's shell has for the stack (``AWSWORLD_KMS_KEY_ID``: ``kms_key_id``)."""
    return {**os.environ, "AWSWORLD_TABLE": config.table_name, "AWSWORLD_BUCKET": config.bucket_name,
            "AWSWORLD_QUEUE_URL": config.queue_url or "", "AWS_ENDPOINT_URL": config.endpoint_url or "",
            "AWS_ENDPOINT_URL_DYNAMODB": config.dynamodb_endpoint_url or config.endpoint_url or "",
            "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "awsworldlocal", "AWS_SECRET_ACCESS_KEY": "local",
            "AWSWORLD_KMS_KEY_ID": kms_key_id or ""}


async def test_the_cli_shows_an_encrypted_runs_values(encrypted: LocalAWS) -> None:
    """``awsworld result`` and ``events`` against the encrypted stack, run as an operator runs them, print the
    decrypted values."""
    run_id, _ = await _run_everything(encrypted, "cli")
    config = encrypted.config
    env = _cli_env(config, config.kms_key_id)
    for command, check in ((["result", run_id, "--json"], lambda out: json.loads(out)["output"]["echo"] == MARKER),
                           (["events", run_id, "--full"], lambda out: out.count(MARKER) >= 8)):
        process = await asyncio.create_subprocess_exec(sys.executable, "-m", "awsworld.cli", *command, env=env,
                                                       stdout=asyncio.subprocess.PIPE,
                                                       stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        assert check(out.decode()), out.decode()[:2000]


async def _run_with_another_runs_key(encrypted: LocalAWS, *, waiting: str | None = None,
                                     failing: bool = False) -> tuple[str, str]:
    """A finished run (``waiting``: a run waiting on that hook token; ``failing``: a failed run) whose ``DATAKEY``
    item was replaced by another run's, which KMS refuses to unwrap under this run's encryption context (as it
    refuses a key that is disabled, deleted or not granted: the run's values cannot be read): the run's id and the
    key its data key names."""
    if encrypted.sqs_s3 == "localstack":
        pytest.skip("LocalStack's KMS does not check the encryption context on Decrypt (AWS and moto do)")
    assert encrypted.client is not None
    first = await encrypted.client.start(echo, "copied")
    await first.result(timeout=60)
    if failing:
        second = await encrypted.client.start(fails, f"victim-{MARKER}")
        with pytest.raises(Exception, match="refused victim"):
            await second.result(timeout=60)
    elif waiting is None:
        second = await encrypted.client.start(echo, "victim")
        await second.result(timeout=60)
    else:
        second = await encrypted.client.start(waits, waiting)
        await second.wait_for_hook(waiting, timeout=60)
    return second.run_id, await _lose_the_key_of(encrypted, second.run_id, first.run_id)


async def _lose_the_key_of(encrypted: LocalAWS, run_id: str, another_run_id: str) -> str:
    """Replace ``run_id``'s ``DATAKEY`` item by ``another_run_id``'s, which KMS refuses to unwrap under this run's
    encryption context: the run's values cannot be read by a process that does not hold its key already. The key
    its data key now names."""
    world = encrypted.world
    ddb = await world.clients.dynamodb()
    item = (await ddb.get_item(TableName=world.config.table_name, ConsistentRead=True,
                               Key={"pk": {"S": f"RUN#{another_run_id}"}, "sk": {"S": DATA_KEY_SK}}))["Item"]
    await ddb.put_item(TableName=world.config.table_name, Item={**item, "pk": {"S": f"RUN#{run_id}"}})
    return item["kid"]["S"]


async def _a_fresh_poller(local: LocalAWS) -> AWSWorld:
    """Replace ``local``'s worker by a fresh one (a Lambda instance started since: no key nor replay of any run
    known) on a World of its own, which it returns; the caller stops the poller and closes the World."""
    assert local.poller is not None
    await local.poller.stop()
    # The stop cancels its long poll's task, not the request on its thread: let that request end on the emulator
    # before the wake is sent, or the wake may be handed to it and hidden for the queue's visibility timeout
    # (CI 98, under load: neither case's fresh poller saw a delivery in 10 s).
    await asyncio.sleep(RECEIVE_WAIT_SECONDS + 1.5)
    fresh = AWSWorld(local.config)  # (the same table and queue, no key nor replay of the run known)
    poller = local.poller = LocalPoller(fresh, Worker(fresh))
    poller.start()
    return fresh


async def test_a_run_key_kms_refuses_to_unwrap_is_named_in_the_clis_error_not_the_current_setting(
        encrypted: LocalAWS) -> None:
    """A run keeps the KMS key its data key was made under. When KMS refuses to unwrap it, ``awsworld result``
    fails in one line naming the run's own key (the item's ``kid``) and why, even when the operator's
    ``AWSWORLD_KMS_KEY_ID`` names another key (a stack moved to a new ``PayloadKmsKeyArn``). Before, the line
    named no key and no cause (``(InvalidCiphertextException)``), and a refused ``Decrypt`` blamed
    ``AWSWORLD_KMS_KEY_ID``, the setting the read never used."""
    run_id, run_key = await _run_with_another_runs_key(encrypted)
    kms = await encrypted.world.clients.kms()
    new_key = (await kms.create_key(Description="awsworld key-change test"))["KeyMetadata"]["Arn"]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "awsworld.cli", "result", run_id, env=_cli_env(encrypted.config, new_key),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 1, out.decode()
    line = err.decode().strip()
    assert "\n" not in line and "Traceback" not in line, line
    assert f"KMS could not unwrap the data key of run {run_id} (InvalidCiphertextException)" in line, line
    assert f"the run's KMS key {run_key}" in line and "copied from another run" in line, line
    assert new_key not in line and "AWSWORLD_KMS_KEY_ID" not in line, line


async def test_the_run_viewer_shows_a_run_whose_values_it_cannot_decrypt_and_says_why(encrypted: LocalAWS) -> None:
    """The viewer's page of a run whose key KMS refuses shows what is stored in plain text (workflow, status, the
    timeline's steps), as ``awsworld describe`` does, and the refusal in place of the values; the JSON API answers
    with the refusal's message. Before, the page was a bare 500 "Internal Server Error" (the traceback went to the
    server's terminal). A World of its own: the fixture's has the run's key in memory since it made the run."""
    import httpx

    from awsworld.ui import create_app

    run_id, run_key = await _run_with_another_runs_key(encrypted)
    world = AWSWorld(encrypted.config)
    try:
        transport = httpx.ASGITransport(app=create_app(world))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            page = await http.get(f"/runs/{run_id}")
            events = await http.get(f"/api/runs/{run_id}/events")
    finally:
        await world.close()
    assert page.status_code == 200, page.text[:500]
    text = page.text.replace("&#x27;", "'")
    assert "tests.encryption.echo" in text and "completed" in text and "run_completed" in text
    assert "cannot be read: KMS could not unwrap the data key of run" in text and run_key in text
    assert MARKER not in text  # (the value, which nothing could decrypt)
    assert events.status_code == 500 and run_key in events.json()["error"], events.text[:500]


async def test_a_running_run_whose_key_is_lost_is_cancelled_by_the_cli(encrypted: LocalAWS) -> None:
    """``awsworld cancel`` of a run whose values cannot be read any more writes no value, so it succeeds (exit 0)
    and the run is cancelled. Before, the cancel landed, then reading the run back with its values failed the
    command (exit 1, ``EncryptionKeyError``) before it sent the run its wake."""
    token = f"enc-lost-{os.urandom(3).hex()}"
    run_id, _ = await _run_with_another_runs_key(encrypted, waiting=token)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "awsworld.cli", "cancel", run_id, env=_cli_env(encrypted.config, None),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert (await encrypted.world.runs.get(run_id, resolve_data="none")).status == "cancelled"


async def test_an_export_of_an_encrypted_run_is_written_for_its_owner_only(encrypted: LocalAWS, tmp_path: Any) -> None:
    """``awsworld export RUN -o FILE`` writes the run's values decrypted (what ``awsworld replay --file`` reads),
    so the file is made 0600 whatever the umask, and tightened when it replaces a file anyone could read, as
    ``awsworld dev`` keeps its state. Before, it was 0644 under the usual umask: the payloads encryption keeps
    from readers of the table, readable by every user of the machine."""
    run_id, _ = await _run_everything(encrypted, "export")
    output = tmp_path / "runs.jsonl"
    output.write_text("an older export\n")
    output.chmod(0o644)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "awsworld.cli", "export", run_id, "-o", str(output),
        env=_cli_env(encrypted.config, encrypted.config.kms_key_id), umask=0o022,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert output.stat().st_mode & 0o777 == 0o600
    text = output.read_text()
    assert MARKER in text and "an older export" not in text


async def test_a_failed_run_whose_key_is_lost_leaves_the_run_list_and_describe_readable(encrypted: LocalAWS) -> None:
    """A failed run's error (and a failed step's) is shown by every read, values or not, and is sealed. When its key
    cannot be unwrapped, a read without values shows it as an error saying so, instead of failing: ``awsworld
    runs`` lists the table (one such run among them failed the whole listing, and the viewer's list, before) and
    ``awsworld describe`` shows the run. A read of its values still fails with ``EncryptionKeyError``."""
    run_id, run_key = await _run_with_another_runs_key(encrypted, failing=True)
    env = _cli_env(encrypted.config, encrypted.config.kms_key_id)
    outputs: dict[str, str] = {}
    for command in (["runs", "--limit", "100", "--workflow", "tests.encryption.fails"], ["describe", run_id],
                    ["result", run_id]):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "awsworld.cli", *command, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 60)
        outputs[command[0]] = out.decode() + err.decode()
        assert process.returncode == (1 if command[0] == "result" else 0), outputs[command[0]]
    assert run_id in outputs["runs"] and "failed" in outputs["runs"], outputs["runs"]
    assert "this error cannot be read: KMS could not unwrap the data key of run" in outputs["describe"], \
        outputs["describe"]
    assert run_key in outputs["describe"] and MARKER not in outputs["describe"], outputs["describe"]
    assert "KMS could not unwrap the data key of run" in outputs["result"], outputs["result"]


async def test_events_of_a_run_whose_key_is_lost_prints_the_timeline_without_values_then_the_refusal(
        encrypted: LocalAWS) -> None:
    """``awsworld events`` of a run whose values cannot be read prints its timeline without them (what the log
    holds in plain text: event types, steps, times), then the refusal, exit 1. Before: only the refusal."""
    run_id, run_key = await _run_with_another_runs_key(encrypted)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "awsworld.cli", "events", run_id,
        env=_cli_env(encrypted.config, encrypted.config.kms_key_id),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 1, out.decode()
    assert f"timeline of {run_id}" in out.decode() and "run_completed" in out.decode(), out.decode()
    assert MARKER not in out.decode()
    assert run_key in err.decode() and "the timeline above is without its values" in err.decode(), err.decode()



async def test_a_run_whose_key_is_lost_is_failed_by_the_cli_and_its_error_reads_everywhere(
        encrypted: LocalAWS) -> None:
    """``awsworld fail`` of a run whose key KMS refuses ends it (exit 0) with the operator's error, stored unsealed
    (the run's key cannot seal it, and no value of the run is in it), so ``describe``, ``result`` and the viewer
    show it. Before, the command failed with the KMS refusal (exit 1) and the run stayed running: the docs sent
    the operator to ``cancel``, whatever end they had chosen."""
    import httpx

    from awsworld.ui import create_app

    token = f"enc-lost-fail-{os.urandom(3).hex()}"
    run_id, run_key = await _run_with_another_runs_key(encrypted, waiting=token)
    env = _cli_env(encrypted.config, encrypted.config.kms_key_id)
    outputs: dict[str, tuple[int | None, str]] = {}
    for command in (["fail", run_id, "--reason", "its key was deleted"], ["describe", run_id], ["result", run_id]):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "awsworld.cli", *command, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 60)
        outputs[command[0]] = process.returncode, out.decode() + err.decode()
    said = "FailedOnRequest: failed on request: its key was deleted"
    code, text = outputs["fail"]
    assert code == 0 and f"failed {run_id}" in text and said in text and "FAILED_ON_REQUEST" in text, text
    assert run_key in text and "stored unsealed" in text, text  # (the World says why the error is plain)
    view = await AWSWorld(encrypted.config).runs.get(run_id, resolve_data="none")
    assert (view.status, view.error_code) == ("failed", "FAILED_ON_REQUEST")
    code, text = outputs["describe"]
    assert code == 0 and said in text and "this error cannot be read" not in text, text
    code, text = outputs["result"]
    assert code == 1 and f"run {run_id} (tests.encryption.waits) failed: {said}" in text, text
    world = AWSWorld(encrypted.config)
    try:
        transport = httpx.ASGITransport(app=create_app(world))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            page = await http.get(f"/runs/{run_id}")
    finally:
        await world.close()
    assert page.status_code == 200 and "failed on request: its key was deleted" in page.text, page.text[:500]


@pytest.mark.parametrize("end", ["fail", "cancel"])
async def test_the_wake_of_a_run_ended_by_the_cli_whose_key_is_lost_is_acknowledged(servers: dict[str, Any],
                                                                                    end: str) -> None:
    """After ``awsworld fail`` or ``cancel`` of a run whose key KMS refuses, the wake that command sends is
    acknowledged by a worker that never held the run's key (a Lambda instance started since, as every one is after
    a while): the flow finds the run's end in its log read without values (nothing of it to decrypt) and does
    what an end asks. Before, every delivery of it failed reading the log's values, so it came back with a growing
    back-off until it reached the dead-letter queue, whose alarm fired for a run the operator ended on purpose.
    (A LocalAWS of its own: its worker is replaced by a fresh one, which the module's shared one must not be.)"""
    async with LocalAWS(**servers, encrypt_payloads=True) as local:
        token = f"enc-lost-wake-{end}-{os.urandom(3).hex()}"
        run_id, _ = await _run_with_another_runs_key(local, waiting=token)
        fresh = await _a_fresh_poller(local)  # (the worker that ran it kept its key and its replay)
        poller = local.poller
        assert poller is not None
        command = ["fail", run_id, "--reason", "its key was deleted"] if end == "fail" else ["cancel", run_id]
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "awsworld.cli", *command, env=_cli_env(local.config, local.config.kms_key_id),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        for _ in range(600):  # the wake's first delivery (the only message of this LocalAWS's queue), within 30 s
            if poller.results:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # (and any other delivery it brings)
        assert poller.results and not any(result.failed for result in poller.results), poller.results
        assert [result.status for result in poller.results] == ["gone"], poller.results
        sqs = await local.world.clients.sqs()
        counts = (await sqs.get_queue_attributes(
            QueueUrl=local.config.queue_url or "",
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]))["Attributes"]
        assert counts == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}, counts
        await poller.stop()
        local.poller = None
        await fresh.close()


@workflow(name="tests.encryption.awaits_a_waiting_child")
async def awaits_a_waiting_child(token: str) -> str:
    try:
        await waits(token)
    except ChildWorkflowError as error:
        return f"{error.error_type}: {error}"
    return "completed"


@pytest.mark.parametrize("report", ["sent", "lost"])
async def test_a_parent_hears_the_error_of_its_child_whose_key_is_lost_and_that_was_failed(
        servers: dict[str, Any], report: str) -> None:
    """A child run whose key is lost, failed by an operator (``Client.fail``: its error stored unsealed): the
    child's flow reads its log without values (``Flow._ended_unread``) and reports its end to its parent with the
    error's type and message, read from the run's head. Before, the parent's ``ChildWorkflowError`` said only
    "failed": the end event read without values carries no error. ``lost``: the fail's wake of the child is lost
    (dropped at the World's ``queue``), so no report is made; the parent's own look at its ended child
    (``report_ended_children``, on a wake) reads the child's log the same way and reports the same error (it read
    the log with values and failed on the lost key: every delivery of the parent, until the dead-letter queue).
    (A LocalAWS of its own: its worker is replaced by one that never held the child's key.)"""
    async with LocalAWS(**servers, encrypt_payloads=True) as local:
        if local.sqs_s3 == "localstack":
            pytest.skip("LocalStack's KMS does not check the encryption context on Decrypt (AWS and moto do)")
        assert local.client is not None
        another = await local.client.start(echo, "copied")
        await another.result(timeout=60)
        token = f"enc-lost-child-{os.urandom(3).hex()}"
        parent = await local.client.start(awaits_a_waiting_child, token)
        child_id = await holder_of_hook(local.world, token, timeout=60)
        await _lose_the_key_of(local, child_id, another.run_id)
        fresh = await _a_fresh_poller(local)
        lost: list[str] = []
        if report == "lost":
            send = fresh.queue

            async def losing_the_childs_wake(queue_name: str, payload: Any, **options: Any) -> Any:
                if str(options.get("idempotency_key", "")).startswith(f"{child_id}:"):
                    lost.append(str(options["idempotency_key"]))
                    return None  # dropped: never reaches SQS
                return await send(queue_name, payload, **options)

            fresh.queue = losing_the_childs_wake  # type: ignore[method-assign]
        try:
            await Client(fresh).fail(child_id, reason="its key was deleted")
            if report == "lost":
                assert lost, "the fail sent the child no wake to lose"
                await Client(fresh).wake(parent.run_id)  # (the watchdog's wake at the parent's due, sooner)
            said = await parent.result(timeout=60)
        finally:
            assert local.poller is not None
            await local.poller.stop()
            local.poller = None
            await fresh.close()
    assert said.startswith("FailedOnRequest: ") and "failed on request: its key was deleted" in said, said


async def test_failing_a_run_whose_key_opens_seals_its_error(encrypted: LocalAWS) -> None:
    """The operator's error is stored unsealed only for a run whose key is lost: ``Client.fail`` of a run whose
    key opens seals it as every value (no item or object holds its text), and reads it back."""
    assert encrypted.client is not None
    token = f"enc-fail-sealed-{os.urandom(3).hex()}"
    run = await encrypted.client.start(waits, token)
    await run.wait_for_hook(token, timeout=60)
    reason = f"sealed-reason-{os.urandom(3).hex()}"
    failed = await encrypted.client.fail(run.run_id, reason=reason)
    assert failed.error is not None and reason in failed.error.message
    items, objects = await _stored_text(encrypted)
    assert not any(reason in item for item in items) and not any(reason.encode() in o for o in objects)
