"""``awsworld serve`` as a process: who it lets in, and what a bad request gets. Every refused request is a clear
4xx with the wire's ``{"error": ...}`` body, and leaves nothing stored (checked afterwards with a good request).
Also the live stream read over HTTP (``HttpWorld``'s framed read, and the raw bytes the TypeScript World reads)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from awsworld.client.http_client import HttpClient
from awsworld.world.errors import RunNotFoundError

AWSWORLD = str(Path(sys.executable).with_name("awsworld"))
TOKEN = "t0ken-0f-the-server-" + "x" * 12
RUN = "wrun_01K0000000000000000000000Z"
RUN_CREATED = {"eventType": "run_created", "specVersion": 5,
               "eventData": {"workflowName": "wf", "deploymentId": "d", "input": {"__type": "Uint8Array",
                                                                                  "data": "ZGV2bFsxXQ=="}}}


def start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    ready = tmp_path / "ready"
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen([AWSWORLD, "serve", "--world", "memory", "--port", "0", "--ready-file", str(ready),
                                *args], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError((tmp_path / "server.log").read_text())
        time.sleep(0.05)
    return process, ready.read_text().strip()


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture
def with_token(tmp_path: Path) -> Iterator[str]:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    process, url = start(tmp_path, "--token-file", str(token_file))
    yield url
    stop(process)


@pytest.fixture
def loopback(tmp_path: Path) -> Iterator[str]:
    process, url = start(tmp_path)
    yield url
    stop(process)


def error_of(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error, dict) and error["status"] == status and error["message"]
    return error


def test_a_token_server_refuses_requests_without_the_token_and_stores_nothing(with_token: str) -> None:
    body = {"runId": RUN, "event": RUN_CREATED}
    missing = httpx.post(f"{with_token}/v1/events", json=body)
    assert error_of(missing, 401)["code"] == "unauthenticated"
    assert missing.headers["www-authenticate"].startswith("Bearer")
    wrong = httpx.post(f"{with_token}/v1/events", json=body, headers={"authorization": "Bearer " + "y" * 32})
    error_of(wrong, 401)
    error_of(httpx.get(f"{with_token}/v1/runs/{RUN}"), 401)
    good = {"authorization": f"Bearer {TOKEN}"}
    error_of(httpx.get(f"{with_token}/v1/runs/{RUN}", headers=good), 404)
    assert httpx.get(f"{with_token}/v1/runs", headers=good).json()["data"] == []
    assert httpx.post(f"{with_token}/v1/events", json=body, headers=good).status_code == 200


async def test_http_client_with_the_token_reads_and_a_wrong_one_is_refused(with_token: str) -> None:
    async with HttpClient(with_token, token=TOKEN) as client:
        with pytest.raises(RunNotFoundError):
            await client.get_run(RUN).status()
        assert (await client.list_runs()).data == []
    async with HttpClient(with_token, token="z" * 32) as wrong:
        with pytest.raises(Exception, match="bearer token"):
            await wrong.list_runs()


def test_serving_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    result = subprocess.run([AWSWORLD, "serve", "--world", "memory", "--host", "0.0.0.0", "--port", "0",
                             "--ready-file", str(tmp_path / "ready")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "needs authentication" in result.stderr and "token" in result.stderr
    assert not (tmp_path / "ready").exists()


def test_bad_requests_get_a_4xx_and_store_nothing(loopback: str) -> None:
    url = f"{loopback}/v1/events"
    error_of(httpx.post(url, content=b"{not json", headers={"content-type": "application/json"}), 400)
    error_of(httpx.post(url, content=b'{"runId": "x"}', headers={"content-type": "text/plain"}), 415)
    error_of(httpx.post(url, json=["a list"]), 400)
    bad_type = error_of(httpx.post(url, json={"runId": RUN, "event": {"eventType": "run_exploded"}}), 400)
    assert bad_type["name"] == "WorkflowWorldError" and bad_type["code"] == "invalid-input"
    no_name = {"runId": RUN, "event": {"eventType": "run_created", "eventData": {"input": 1}}}
    assert "workflowName" in str(error_of(httpx.post(url, json=no_name), 400)["message"])
    newer = {"runId": RUN, "event": {**RUN_CREATED, "specVersion": 99}}
    refused = error_of(httpx.post(url, json=newer), 400)
    assert refused["name"] == "RunNotSupportedError" and refused["worldSpecVersion"] == 8
    error_of(httpx.post(url, json={"runId": RUN, "event": RUN_CREATED, "params": {"eventCount": "3"}}), 400)
    error_of(httpx.get(f"{loopback}/v1/runs?limit=many"), 400)
    error_of(httpx.get(f"{loopback}/v1/nowhere"), 404)
    error_of(httpx.delete(f"{loopback}/v1/runs"), 405)
    rebound = httpx.get(f"{loopback}/v1/runs", headers={"host": "attacker.example"})
    assert error_of(rebound, 421)["code"] == "not-loopback"
    missing = error_of(httpx.post(url, json={"runId": RUN, "event": {"eventType": "run_started"}}), 404)
    assert missing["name"] == "WorkflowRunNotFoundError"
    assert httpx.get(f"{loopback}/v1/runs").json()["data"] == []
    error_of(httpx.get(f"{loopback}/v1/runs/{RUN}"), 404)


async def test_a_stream_reads_live_over_http_framed_and_raw(loopback: str) -> None:
    async with HttpClient(loopback) as client:
        world = client.world
        await world.events.create(RUN, RUN_CREATED)
        await world.events.create(RUN, {"eventType": "run_started"})
        await world.streams.write(RUN, "strm_1_user", b"\x00first")

        async def framed() -> list[bytes]:
            return [chunk async for chunk in world.streams.get(RUN, "strm_1_user")]

        async def raw() -> bytes:
            async with httpx.AsyncClient(timeout=None) as http, \
                    http.stream("GET", f"{loopback}/v1/runs/{RUN}/streams/strm_1_user?startIndex=0") as response:
                assert response.headers["content-type"] == "application/octet-stream"
                return b"".join([piece async for piece in response.aiter_bytes()])

        readers = asyncio.gather(framed(), raw())
        await asyncio.sleep(0.2)
        await world.streams.write_multi(RUN, "strm_1_user", [b"second", "third \u2713"])
        await world.streams.close(RUN, "strm_1_user")
        chunks, joined = await asyncio.wait_for(readers, 30)
    assert chunks == [b"\x00first", b"second", "third \u2713".encode()]
    assert joined == b"".join(chunks)
