"""``awsworld serve`` as a process: who it lets in, and what a bad request gets. Every refused request is a clear
4xx with the wire's ``{"error": ...}`` body, and leaves nothing stored (checked afterwards with a good request).
Also the live stream read over HTTP (``HttpWorld``'s framed read, and the raw bytes the TypeScript World reads),
the server ending a live read whose reader disconnected, and ``HttpClient`` refusing at start a workflow name the
server's publications lack (``GET /v1/published``), on the in-memory World and on the emulator."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from awsworld import PydanticCodec, workflow
from awsworld._memory import MemoryWorld
from awsworld.authoring.definitions import WorkflowNotRegisteredError
from awsworld.client.client import Client
from awsworld.client.http_client import HttpClient
from awsworld.world.errors import InvalidInputError, RunNotFoundError
from serving import AWSWORLD, start_serve, stop_serve  # tests/serving.py (tests/ is on sys.path)
from tied import tied  # tests/tied.py (tests/ is on sys.path)

TOKEN = "t0ken-0f-the-server-" + "x" * 12
RUN = "wrun_01K0000000000000000000000Z"
RUN_CREATED = {"eventType": "run_created", "specVersion": 5,
               "eventData": {"workflowName": "wf", "deploymentId": "d", "input": {"__type": "Uint8Array",
                                                                                  "data": "ZGV2bFsxXQ=="}}}

TESTS = Path(__file__).resolve().parent.parent


@workflow(name="shop.order")
async def order(item: str) -> str:
    """What ``served`` runs (the server imports this module): the one name its publication holds."""
    return f"ordered {item}"


@workflow(name="shop.coded", args_codec=PydanticCodec(tuple[int, int]))
async def coded(a: int, b: int) -> int:
    """Served too: a workflow whose arguments its codec checks (the server knows it, so it encodes them)."""
    return a + b


@pytest.fixture
def with_token(tmp_path: Path) -> Iterator[str]:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    process, url = start_serve(tmp_path, "--world", "memory", "--token-file", str(token_file))
    yield url
    stop_serve(process)


@pytest.fixture
def loopback(tmp_path: Path) -> Iterator[str]:
    process, url = start_serve(tmp_path, "--world", "memory")
    yield url
    stop_serve(process)


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


def test_a_refused_request_is_a_line_in_the_servers_log_too(with_token: str, tmp_path: Path) -> None:
    """A client with a wrong or missing token: whoever runs the server sees it (it printed nothing), naming the
    request, its sender and why; the next refusals within a minute are counted, not logged one by one."""
    error_of(httpx.get(f"{with_token}/v1/runs"), 401)
    error_of(httpx.post(f"{with_token}/v1/events", json={}, headers={"authorization": "Bearer " + "y" * 32}), 401)
    error_of(httpx.get(f"{with_token}/v1/info"), 401)
    log = (tmp_path / "server.log").read_text()
    [line] = [line for line in log.splitlines() if "refused" in line]
    assert line.startswith("awsworld serve: refused GET /v1/runs from 127.0.0.1 with 401: a bearer token is required")
    assert "WORLD_SERVER_TOKEN" in line and TOKEN not in log


def test_a_refused_request_for_a_hook_by_its_token_does_not_log_the_token(with_token: str, tmp_path: Path) -> None:
    """A webhook's token is all it takes to resume it: a refused ``GET /v1/hooks/by-token/{token}`` (a client with a
    stale server token) logged the path, token and all, for whoever reads the server's log."""
    hook_token = "whk-" + "s3cr3t" * 6
    error_of(httpx.get(f"{with_token}/v1/hooks/by-token/{hook_token}"), 401)
    log = (tmp_path / "server.log").read_text()
    assert "refused GET /v1/hooks/by-token/... from 127.0.0.1 with 401" in log and hook_token not in log, log


def test_a_host_that_is_not_loopback_is_told_what_to_do(loopback: str, tmp_path: Path) -> None:
    """A 421 names the host it refused and the way out (a loopback name, or --host with --token-file), and the
    server's log says whom it refused."""
    refused = error_of(httpx.get(f"{loopback}/v1/runs", headers={"host": "attacker.example:80"}), 421)
    assert "'attacker.example:80'" in str(refused["message"]) and "--token-file" in str(refused["message"])
    assert "refused GET /v1/runs from 127.0.0.1 with 421: addressed to 'attacker.example:80'" in (
        tmp_path / "server.log").read_text()


async def test_http_client_with_the_token_reads_and_a_wrong_one_is_refused(with_token: str) -> None:
    async with HttpClient(with_token, token=TOKEN) as client:
        with pytest.raises(RunNotFoundError):
            await client.get_run(RUN).status()
        assert (await client.list_runs()).data == []
    async with HttpClient(with_token, token="z" * 32) as wrong:
        with pytest.raises(Exception, match="bearer token"):
            await wrong.list_runs()


def test_serving_no_stack_names_the_emulator_too(tmp_path: Path) -> None:
    """``serve`` with no stack set (its default is ``--world aws``): the hint names ``--world emulator`` beside the
    stack's variables, for whoever wanted a World of their own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWSWORLD_")}
    result = subprocess.run([AWSWORLD, "serve", "--port", "0", "--ready-file", str(tmp_path / "ready")], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "AWSWORLD_TABLE and AWSWORLD_BUCKET not set" in result.stderr, result.stderr
    assert "--world emulator serves a World of its own" in result.stderr and "awsworld dev" in result.stderr
    assert not (tmp_path / "ready").exists()


def test_serving_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    result = subprocess.run([AWSWORLD, "serve", "--world", "memory", "--host", "0.0.0.0", "--port", "0",
                             "--ready-file", str(tmp_path / "ready")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "needs authentication" in result.stderr and "token" in result.stderr
    assert not (tmp_path / "ready").exists()


async def test_on_every_interface_it_says_how_to_reach_it_and_its_ready_file_holds_a_url_that_does(
        tmp_path: Path) -> None:
    """``--host 0.0.0.0`` printed ``http://0.0.0.0:PORT``, a name no other machine can use: it now says the port on
    every interface, this machine's name, and the loopback URL (also what the ready file holds); and that it is
    plain HTTP, which it did not say."""
    (tmp_path / "token").write_text(TOKEN + "\n")
    process, url = start_serve(tmp_path, "--world", "memory", "--host", "0.0.0.0", "--token-file",
                               str(tmp_path / "token"))
    try:
        port = int(url.rsplit(":", 1)[1])
        assert url == f"http://127.0.0.1:{port}"
        async with HttpClient(url, token=TOKEN) as client:
            assert (await client.list_runs()).data == []
    finally:
        stop_serve(process)
    said = (tmp_path / "server.log").read_text()
    assert (f"awsworld serve: every interface, port {port}: http://{socket.gethostname()}:{port} (or this "
            f"machine's address) from other machines, {url} here (memory World; token; Ctrl-C stops)") in said, said
    # The token keeps callers out, not eavesdroppers: plain HTTP beyond loopback is said once, with the way out.
    [warning] = [line for line in said.splitlines() if "warning" in line]
    assert "plain HTTP" in warning and "bearer token" in warning and "TLS proxy" in warning, said


def test_a_token_too_short_is_refused_with_a_hint_that_fits(tmp_path: Path) -> None:
    """A short token on the default host: the hint says to make a longer one (it said to keep the default
    --host, which the command already did)."""
    (tmp_path / "token").write_text("short\n")
    result = subprocess.run([AWSWORLD, "serve", "--world", "memory", "--port", "0", "--token-file",
                             str(tmp_path / "token"), "--ready-file", str(tmp_path / "ready")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "at least 16 characters" in result.stderr and "token_urlsafe" in result.stderr
    assert "--host" not in result.stderr and not (tmp_path / "ready").exists()


def test_a_missing_token_file_says_how_to_make_one(tmp_path: Path) -> None:
    """``awsworld serve --host 0.0.0.0 --token-file token.txt``, as the World-over-HTTP page types it, in a folder
    without that file: the hint said only "give a file holding the token". It gives the command that writes one,
    readable by its owner only; run as given, the same ``serve`` then starts and wants that token."""
    token_file = tmp_path / "my token.txt"
    args = ["serve", "--world", "memory", "--host", "0.0.0.0", "--port", "0", "--token-file", str(token_file),
            "--ready-file", str(tmp_path / "ready")]
    refused = subprocess.run([AWSWORLD, *args], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("awsworld serve: cannot read --token-file:"), refused.stderr
    make = re.search(r"make one \(yours only\): (.*)\)$", refused.stderr.strip())
    assert make is not None, refused.stderr
    subprocess.run(["bash", "-c", make.group(1)], check=True, timeout=30)
    token = token_file.read_text().strip()
    assert len(token) >= 16 and token_file.stat().st_mode & 0o077 == 0
    process, url = start_serve(tmp_path, "--world", "memory", "--host", "0.0.0.0", "--token-file", str(token_file))
    try:
        assert httpx.get(f"{url}/v1/runs").status_code == 401
        assert httpx.get(f"{url}/v1/runs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    finally:
        stop_serve(process)


def test_serve_without_its_extra_names_the_extra_to_install(tmp_path: Path) -> None:
    """Without Starlette (an install with ``[local]`` only), ``serve`` is a usage error naming ``awsworld[serve]``,
    the extra that has what it needs (it named ``[ui]``, which lacks httpx and Mangum)."""
    without = "import sys; sys.modules['starlette'] = None; from awsworld.cli import main; sys.exit(main())"
    result = subprocess.run([sys.executable, "-c", without, "serve", "--world", "memory", "--port", "0",
                             "--ready-file", str(tmp_path / "ready")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "awsworld serve needs Starlette" in result.stderr and "pip install 'awsworld[serve]'" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "ready").exists()


def test_a_port_already_taken_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        result = subprocess.run([AWSWORLD, "serve", "--world", "memory", "--port", port, "--ready-file",
                                 str(tmp_path / "ready")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr
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
    bad_change = error_of(httpx.post(f"{loopback}/v1/runs/{RUN}/attributes", json={"changes": [{"key": 5}]}), 400)
    assert bad_change["details"] == {"field": "eventData.changes.0.key"}  # (it was a 500)
    error_of(httpx.get(f"{loopback}/v1/nowhere"), 404)
    error_of(httpx.delete(f"{loopback}/v1/runs"), 405)
    rebound = httpx.get(f"{loopback}/v1/runs", headers={"host": "attacker.example"})
    assert error_of(rebound, 421)["code"] == "not-loopback"
    missing = error_of(httpx.post(url, json={"runId": RUN, "event": {"eventType": "run_started"}}), 404)
    assert missing["name"] == "WorkflowRunNotFoundError"
    assert httpx.get(f"{loopback}/v1/runs").json()["data"] == []
    error_of(httpx.get(f"{loopback}/v1/runs/{RUN}"), 404)


def test_a_body_too_large_is_read_to_its_end_and_answered_413_not_a_broken_connection(loopback: str) -> None:
    """A body above the server's limit gets its 413 naming its size and what fits. The server used to answer as
    soon as it saw the Content-Length and close the connection while the client was still sending: httpx here
    still read that early answer, but undici often broke off with ``write EPIPE`` first, which world-awsworld
    reported as the server being unreachable (a 70 MiB ``Uint8Array``; 61 and 100 MiB got their 413)."""
    from awsworld._http.app import MAX_BODY_BYTES

    size = MAX_BODY_BYTES + 16 * 1024 * 1024
    piece = b"A" * (1024 * 1024)

    head, tail = b'{"runId": null, "event": {"eventType": "run_created", "eventData": {"input": "', b'"}}}'

    def body() -> Iterator[bytes]:  # (streamed: the test does not hold 96 MiB)
        yield head
        left = size - len(head) - len(tail)
        while left > 0:
            yield piece[:left]
            left -= len(piece)
        yield tail

    response = httpx.post(f"{loopback}/v1/events", content=body(), timeout=120,
                          headers={"content-type": "application/json", "content-length": str(size)})
    refused = error_of(response, 413)
    assert refused["details"] == {"field": "body"}
    assert f"the body is {size} bytes" in str(refused["message"]), refused
    assert "AWSWORLD_MAX_VALUE_BYTES" in str(refused["message"])
    assert httpx.get(f"{loopback}/v1/runs").json()["data"] == []  # (nothing stored, and the server still answers)


def _dev_without_a_module(folder: Path, state: Path) -> tuple[subprocess.Popen[str], list[str], dict[str, str]]:
    """``awsworld dev --state STATE`` with no MODULE (a TypeScript app's World), once it serves: it, its banner
    and the environment its export lines describe."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS", "AWSWORLD"))}
    process = subprocess.Popen([AWSWORLD, "dev", "--state", str(state)], cwd=folder, env=clean, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=tied())
    assert process.stdout is not None
    banner: list[str] = []
    while not banner or not banner[-1].startswith("serving deliveries"):
        line = process.stdout.readline()
        if not line:
            raise AssertionError("awsworld dev exited:\n" + "".join(banner))
        banner.append(line)
    exports = dict(m.groups() for line in banner if (m := re.fullmatch(r"export (\w+)=(\S+)\n", line)))
    return process, banner, {**clean, **exports}


def _serve_on(env: dict[str, str], folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``awsworld serve`` (the aws World) on the stack ``env`` names: ``dev``'s export lines."""
    folder.mkdir(exist_ok=True)
    ready = folder / "ready"
    process = subprocess.Popen([AWSWORLD, "serve", "--port", "0", "--ready-file", str(ready)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, preexec_fn=tied())
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert process.poll() is None and time.monotonic() < deadline, "awsworld serve did not start"
        time.sleep(0.05)
    return process, ready.read_text().strip()


def test_dev_without_a_module_is_a_typescript_apps_world_and_its_restart_leaves_the_apps_runs_alone(
        tmp_path: Path) -> None:
    """A TypeScript-only project has no Python module to give ``awsworld dev`` (it refused: MODULE is required),
    and ``serve --world emulator`` starts empty each time. Without a module, dev serves the queue's deliveries
    and keeps its state, and ``serve`` on its export lines serves the World to the app. Its restart replayed every
    unfinished run as a Python one and parked the TypeScript runtime's (``no workflow named ... is registered
    here``, an ``attr_set`` in the app's log): they are left to their app."""
    state = tmp_path / "state"
    dev, banner, env = _dev_without_a_module(tmp_path, state)
    try:
        assert any(line.startswith("no modules: dev runs the queue's deliveries") for line in banner), banner
        assert "AWSWORLD_MODULES" not in "".join(banner)
        server, url = _serve_on(env, tmp_path / "serve")
        try:
            context = {"traceCarrier": {}, "workflowCoreVersion": "5.0.0-beta.35", "features": {"encryption": False}}
            created = httpx.post(f"{url}/v1/events", json={"runId": RUN, "event": {
                **RUN_CREATED, "eventData": {**RUN_CREATED["eventData"], "executionContext": context}}})
            assert created.status_code == 200, created.text
            started = httpx.post(f"{url}/v1/events", json={"runId": RUN, "event": {"eventType": "run_started",
                                                                                     "specVersion": 5}})
            assert started.status_code == 200, started.text
        finally:
            stop_serve(server)
    finally:
        dev.terminate()
        dev.communicate(timeout=60)
    again, banner, env = _dev_without_a_module(tmp_path, state)
    try:
        said = "".join(banner)
        assert "1 of the Workflow SDK's TypeScript runtime left to its app" in said, said
        assert f"run {RUN} is parked" not in said
        server, url = _serve_on(env, tmp_path / "serve-again")
        try:
            run = httpx.get(f"{url}/v1/runs/{RUN}").json()
            assert run["status"] == "running" and run["attributes"] == {}, run
            logged = [e["eventType"] for e in httpx.get(f"{url}/v1/runs/{RUN}/events").json()["data"]]
            assert logged == ["run_created", "run_started"]
        finally:
            stop_serve(server)
    finally:
        again.terminate()
        again.communicate(timeout=60)


PACKAGE = TESTS.parent / "packages" / "world-awsworld"
SUITE_APP = PACKAGE / "node_modules" / "@workflow" / "world-testing" / "dist"


def _sleeping_app(folder: Path) -> Path:
    """The Workflow SDK's own test app (``@workflow/world-testing``'s server, a real build of TypeScript workflows:
    what ``.ci/world-testing`` runs) with its ``sleepWorkflow``'s 1-second sleep made an hour's, copied into
    ``folder`` (its packages found through a link to the package's node_modules): its server's file."""
    app = folder / "app"
    shutil.copytree(SUITE_APP, app / "dist")
    flow = app / "dist" / ".well-known" / "workflow" / "v1" / "flow.mjs"
    text = flow.read_text()
    assert text.count('await sleep("1s");') == 1, "the suite's sleepWorkflow changed"
    flow.write_text(text.replace('await sleep("1s");', 'await sleep("1h");'))
    (app / "node_modules").symlink_to(PACKAGE / "node_modules")
    return app / "dist" / "src" / "server.mjs"


def _start_app(server: Path, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The app on a free port, its World the package's (``WORKFLOW_TARGET_WORLD``, as ``.ci/world-testing`` gives
    it), on ``env``'s ``WORLD_SERVER_URL``: it and its URL."""
    with log.open("wb") as out:
        process = subprocess.Popen(["node", str(server)], cwd=PACKAGE, stdout=out, stderr=subprocess.STDOUT,
                                   env={**env, "WORKFLOW_TARGET_WORLD": "./dist/index.js"}, preexec_fn=tied())
    deadline = time.monotonic() + 60
    while not (port := re.search(r"listening on http://\S*:(\d+)", log.read_text(errors="replace"))):
        assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.05)
    return process, f"http://localhost:{port.group(1)}"


@pytest.mark.skipif(shutil.which("node") is None or not (PACKAGE / "dist" / "index.js").exists()
                    or not SUITE_APP.exists(), reason="needs node and packages/world-awsworld built (npm ci, tsc)")
def test_skip_and_wake_of_a_typescript_apps_sleeping_run_are_refused_saying_how_its_app_does_it(
        tmp_path: Path) -> None:
    """A TypeScript app's run sleeping an hour, on ``awsworld dev --state`` + ``serve``. ``awsworld skip RUN``
    recorded the sleep's end and said "the run goes on now", and ``awsworld wake RUN`` said "woke": both sent
    awsworld's own flow message, which the delivery acknowledges unread for such a run (the app's address travels
    only on the messages its runtime queues), so the run slept on for its hour (exit 0 both). Each is now exit 1
    with ``SdkRunError`` saying what the app calls, nothing recorded or sent; and what it says, run in the app's
    environment, ends the sleep and the run completes."""
    dev, _, env = _dev_without_a_module(tmp_path, tmp_path / "state")
    try:
        server, url = _serve_on(env, tmp_path / "serve")
        try:
            app, app_url = _start_app(_sleeping_app(tmp_path), {**env, "WORLD_SERVER_URL": url}, tmp_path / "app.log")
            try:
                run_id = httpx.post(f"{app_url}/invoke", json={"file": "workflows/inline-execution.ts",
                                                                "workflow": "sleepWorkflow"}).json()["runId"]

                def logged() -> list[str]:
                    page = httpx.get(f"{url}/v1/runs/{run_id}/events").json()
                    return [e["eventType"] for e in page["data"]]

                deadline = time.monotonic() + 30
                while "wait_created" not in logged():
                    assert time.monotonic() < deadline, logged()
                    time.sleep(0.1)
                asleep = logged()
                commands = {said: subprocess.Popen([AWSWORLD, command, run_id], env=env, text=True,
                                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=tied())
                            for command, said in (("skip", "Nothing was recorded (sdk-run)"),
                                                  ("wake", "Nothing was sent (sdk-run)"))}  # (at once: seconds each)
                for said, command in commands.items():
                    out, err = command.communicate(timeout=60)
                    assert command.returncode == 1, (command.args, out, err)
                    assert "TypeScript runtime (@workflow/core 5.0.0-beta.35)" in err, err
                    assert f"getRun({run_id!r}).wakeUp() from 'workflow/api'" in err, err
                    assert err.rstrip().endswith(said), err
                assert logged() == asleep
                assert httpx.get(f"{url}/v1/runs/{run_id}").json()["status"] == "running"
                wake_up = ("import { setWorld } from 'workflow/runtime'; import { getRun } from 'workflow/api';"
                           "import { createWorld } from './dist/index.js'; setWorld(createWorld({deliveryBaseUrl: "
                           f"{json.dumps(app_url)}}})); console.log(JSON.stringify(await getRun({json.dumps(run_id)})"
                           ".wakeUp()));")
                woken = subprocess.run(["node", "--input-type=module", "-e", wake_up], cwd=PACKAGE, capture_output=True,
                                       text=True, env={**env, "WORLD_SERVER_URL": url}, timeout=60)
                assert woken.stdout.strip() == '{"stoppedCount":1}', (woken.stdout, woken.stderr)
                ended = httpx.get(f"{url}/v1/runs/{run_id}/wait", params={"timeout": 30}, timeout=40).json()
                assert ended["status"] == "completed", ended
            finally:
                app.terminate()
                app.wait(timeout=20)
        finally:
            stop_serve(server)
    finally:
        dev.terminate()
        dev.communicate(timeout=60)


def test_every_event_a_write_answers_or_a_listing_shows_carries_a_spec_version(loopback: str) -> None:
    """The Workflow SDK sends ``specVersion`` on every event it writes and reads an event without one as legacy
    data (``@workflow/world``'s ``BaseEventSchema``). awsworld's own writers send none: ``Client.cancel`` (here
    ``/v1/client/runs/{id}/cancel``, and a Python ``HttpWorld``'s ``run_cancelled``), ``runs.set_attributes``, the
    Python runtime's events. Their events, and the step or wait such a write makes, were answered and listed
    without it; they carry this World's version now (as world-local stamps its own), the SDK's stay as sent."""
    from awsworld.world.ids import SPEC_VERSION_CURRENT

    def write(run_id: str, event: dict[str, Any]) -> dict[str, Any]:
        answer = httpx.post(f"{loopback}/v1/events", json={"runId": run_id, "event": event})
        assert answer.status_code == 200, answer.text
        return answer.json()

    runs = [RUN, RUN[:-1] + "Y"]
    for run_id in runs:  # two runs as the SDK's runtime makes them: specVersion 5 on every event
        write(run_id, RUN_CREATED)
        write(run_id, {"eventType": "run_started", "specVersion": 5})
    step = write(RUN, {"eventType": "step_created", "correlationId": "step_1",
                       "eventData": {"stepName": "s", "input": {"__type": "Uint8Array", "data": "ZGV2bFtd"}}})
    assert step["event"]["specVersion"] == step["step"]["specVersion"] == SPEC_VERSION_CURRENT
    wait = write(RUN, {"eventType": "wait_created", "correlationId": "wait_1", "specVersion": None,
                       "eventData": {"resumeAt": "2099-01-01T00:00:00Z"}})  # (a null one is none given)
    assert wait["event"]["specVersion"] == wait["wait"]["specVersion"] == SPEC_VERSION_CURRENT
    attributes = httpx.post(f"{loopback}/v1/runs/{RUN}/attributes", json={"changes": [{"key": "k", "value": "v"}]})
    assert attributes.status_code == 200 and attributes.json()["event"]["specVersion"] == SPEC_VERSION_CURRENT
    cancelled = write(runs[1], {"eventType": "run_cancelled", "eventData": {"cancelReason": "by HttpWorld"}})
    assert cancelled["event"]["specVersion"] == SPEC_VERSION_CURRENT and cancelled["run"]["specVersion"] == 5
    by_client = httpx.post(f"{loopback}/v1/client/runs/{RUN}/cancel", json={"reason": "by Client.cancel"})
    assert by_client.status_code == 200 and by_client.json()["status"] == "cancelled", by_client.text

    for run_id in runs:
        listed = httpx.get(f"{loopback}/v1/runs/{run_id}/events").json()["data"]
        versions = [(e["eventType"], e.get("specVersion")) for e in listed]
        own = ["step_created", "wait_created", "attr_set", "run_cancelled"] if run_id == RUN else ["run_cancelled"]
        assert versions == [("run_created", 5), ("run_started", 5), *((kind, SPEC_VERSION_CURRENT) for kind in own)]
        assert httpx.get(f"{loopback}/v1/runs/{run_id}").json()["specVersion"] == 5  # (the run keeps its creator's)


def test_a_kept_alive_connection_gets_each_answer_whole_at_once(loopback: str) -> None:
    """A client reusing its connection (world-awsworld's undici Agent, httpx) gets each answer's body with its
    headers. The server's sockets lacked ``TCP_NODELAY`` (``_http/listen.py``: asyncio sets it only on a listener
    whose ``proto`` says TCP), so from a connection's second request on, the body (uvicorn's second write) waited
    for the client's delayed ACK: 40 ms or more every time, 40 requests a second (``bench/http_keepalive.py``).
    The least of ten waits is measured, so a slow moment on a busy machine does not fail the test."""
    host, port = loopback.removeprefix("http://").rsplit(":", 1)
    waits: list[float] = []
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(11):
            connection.sendall(f"GET /v1/deployment-id HTTP/1.1\r\nhost: {host}\r\n\r\n".encode())
            received = connection.recv(65536)
            first = time.monotonic()
            head, _, body = received.partition(b"\r\n\r\n")
            declared = re.search(rb"content-length: (\d+)", head.lower())
            assert declared is not None, head
            length = int(declared.group(1))
            while len(body) < length:
                body += connection.recv(65536)
            assert json.loads(body)["deploymentId"], body
            waits.append(time.monotonic() - first)
    assert min(waits[1:]) < 0.02, f"the body came {min(waits[1:]) * 1000:.0f} ms after its headers at best"


async def test_dot_tokens_and_stream_names_a_url_path_cannot_carry(loopback: str) -> None:
    """A URL parser drops a path segment ``.`` or ``..`` (httpx as ``fetch`` does): ``get_by_token("..")`` reached
    ``GET /v1/hooks``, a 400 about ``runId``, and ``"."`` no hook. The client sends them as ``%2E`` (the server
    decodes them back; packages/world-awsworld/test/world.node-test.mjs covers ``fetch``, which drops ``%2e`` too,
    through ``?token=``). A stream name with a ``/`` (sent as ``%2F``) split the server's path: a 404 "no
    endpoint" where the World refuses the name, naming ``streamName``; a name ``.`` or ``..`` is refused too."""
    async with HttpClient(loopback) as client:
        world = client.world
        await world.events.create(RUN, RUN_CREATED)
        await world.events.create(RUN, {"eventType": "run_started"})
        for n, token in enumerate((".", "..")):
            await world.events.create(RUN, {"eventType": "hook_created", "correlationId": f"hook_{n}",
                                            "eventData": {"token": token}})
            assert (await world.hooks.get_by_token(token)).token == token
        for name in ("a/b", "..", "."):
            with pytest.raises(InvalidInputError, match=r"^streamName ") as refused:
                await world.streams.write(RUN, name, b"x")
            assert refused.value.field == "streamName"
            with pytest.raises(InvalidInputError, match=r"^streamName "):
                await world.streams.get_chunks(RUN, name)
    async with httpx.AsyncClient() as raw:
        by_query = await raw.get(f"{loopback}/v1/hooks/by-token", params={"token": ".."})
        missing = await raw.get(f"{loopback}/v1/hooks/by-token")
    assert by_query.status_code == 200 and by_query.json()["token"] == "..", by_query.text
    assert error_of(missing, 400)["message"] == "give the hook's token: GET /v1/hooks/by-token/TOKEN, or ?token=TOKEN"


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


async def test_http_client_signs_each_request_with_sigv4_for_a_function_url() -> None:
    """``HttpClient(url, aws_region=...)`` signs as AWS checks a Function URL with ``AuthType: AWS_IAM``: the
    signature each request carries is the one botocore computes for that request (service ``lambda``)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    from starlette.types import Receive, Scope, Send

    from awsworld._http.app import create_app
    from awsworld._http.auth import Auth
    from awsworld._memory import MemoryWorld
    from awsworld.client.http_world import HttpWorld, SigV4

    credentials = Credentials("AKIDEXAMPLE", "secret", "session-token")
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    app = create_app(MemoryWorld(), auth=Auth("aws-iam"))

    async def recording(scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        if scope["type"] == "http":
            message = await receive()
            body = message.get("body", b"")
            query = scope["query_string"].decode()
            url = f"https://fn.lambda-url.eu-west-1.on.aws{scope['path']}" + (f"?{query}" if query else "")
            seen.append((scope["method"], url, {k.decode(): v.decode() for k, v in scope["headers"]}, body))

            async def replay() -> Any:
                return {"type": "http.request", "body": body, "more_body": False}

            await app(scope, replay, send)
            return
        await app(scope, receive, send)

    transport = httpx.ASGITransport(app=recording)
    auth = SigV4("eu-west-1", credentials)
    async with HttpWorld("https://fn.lambda-url.eu-west-1.on.aws", http=httpx.AsyncClient(
            transport=transport, base_url="https://fn.lambda-url.eu-west-1.on.aws", auth=auth)) as world:
        await world.events.create(RUN, RUN_CREATED)
        assert (await world.runs.get(RUN)).spec_version == 5
    assert [method for method, *_ in seen] == ["POST", "GET"]
    for method, url, headers, body in seen:
        assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert "/eu-west-1/lambda/aws4_request" in headers["authorization"]
        assert headers["x-amz-security-token"] == "session-token"
        again = AWSRequest(method=method, url=url, data=body, headers={
            k: v for k, v in headers.items() if k not in ("authorization", "x-amz-security-token", "connection")})
        signer = SigV4Auth(credentials, "lambda", "eu-west-1")
        again.context["timestamp"] = headers["x-amz-date"]  # (add_auth would take the clock's time)
        signer._modify_request_before_signing(again)
        signature = signer.signature(signer.string_to_sign(again, signer.canonical_request(again)), again)
        assert headers["authorization"].endswith(f"Signature={signature}")


@pytest.fixture
def with_workflows(tmp_path: Path) -> Iterator[str]:
    """A memory server that imported ``runtime.test_client_helpers`` (its workflows run there)."""
    process, url = start_serve(tmp_path, "runtime.test_client_helpers", "--world", "memory",
                               cwd=Path(__file__).resolve().parent.parent)
    yield url
    stop_serve(process)


def test_the_client_endpoints_start_wait_resume_and_cancel_over_plain_http(with_workflows: str) -> None:
    url = with_workflows
    started = httpx.post(f"{url}/v1/client/start", json={"workflow": "runtime.test_client_helpers.echo_run_id",
                                                         "args": ["plain"], "kwargs": {"suffix": " http"}})
    assert started.status_code == 202, started.text
    run_id = started.json()["runId"]
    ended = httpx.get(f"{url}/v1/runs/{run_id}/wait", params={"timeout": 30}, timeout=40).json()
    assert (ended["status"], ended["output"]) == ("completed", "plain http")
    ended_again = httpx.post(f"{url}/v1/client/runs/{run_id}/cancel", json={})
    assert error_of(ended_again, 409)["name"] == "EntityConflictError"  # (ending an ended run)
    bad_args = httpx.post(f"{url}/v1/client/start", json={"workflow": "runtime.test_client_helpers.echo_run_id",
                                                          "args": [], "kwargs": {"nope": 1}})
    assert "argument" in str(error_of(bad_args, 400)["message"])
    unknown = error_of(httpx.post(f"{url}/v1/client/hooks/resume", json={"token": "nobody", "payload": 1}), 404)
    assert unknown["name"] == "HookNotFoundError"

    token = "tok-plain-http"
    hooked = httpx.post(f"{url}/v1/client/start", json={"workflow": "runtime.test_client_helpers.hook_after_a_step",
                                                        "args": [token]}).json()["runId"]
    for _ in range(200):
        held = httpx.get(f"{url}/v1/hooks/by-token/{token}")
        if held.status_code == 200:
            break
        time.sleep(0.05)
    hook = held.json()
    assert (hook["runId"], hook["ownerId"], hook["projectId"], hook["environment"]) == (
        hooked, "awsworld", "memory", "local")
    resumed = httpx.post(f"{url}/v1/client/hooks/resume", json={"token": token, "payload": {"ok": True}})
    assert resumed.status_code == 200 and resumed.json()["recorded"] is True
    done = httpx.get(f"{url}/v1/runs/{hooked}/wait", params={"timeout": 30}, timeout=40).json()
    assert (done["status"], done["output"]) == ("completed", {"ok": True})

    # A run reaches create_hook after a step: "wait" holds a resume sent at its start until then (a 404 at once
    # without it, as above), as Client.resume_hook(wait=...) does.
    for wait in (-1, 61, "5"):
        refused = httpx.post(f"{url}/v1/client/hooks/resume", json={"token": "tok-wait", "payload": 0, "wait": wait})
        assert error_of(refused, 400)["details"] == {"field": "wait"}
    early = httpx.post(f"{url}/v1/client/start", json={"workflow": "runtime.test_client_helpers.hook_after_a_step",
                                                       "args": ["tok-wait"]}).json()["runId"]
    waited = httpx.post(f"{url}/v1/client/hooks/resume", json={"token": "tok-wait", "payload": 7, "wait": 30},
                        timeout=40)
    assert waited.status_code == 200 and waited.json()["event"]["runId"] == early, waited.text
    done = httpx.get(f"{url}/v1/runs/{early}/wait", params={"timeout": 30}, timeout=40).json()
    assert (done["status"], done["output"]) == ("completed", 7)

    waiting = httpx.post(f"{url}/v1/client/start", json={"workflow": "runtime.test_client_helpers.hook_after_a_step",
                                                         "args": ["tok-never"]}).json()["runId"]
    cancelled = httpx.post(f"{url}/v1/client/runs/{waiting}/cancel", json={"reason": "not needed"})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize("open_request", [True, False], ids=["a-long-poll-open", "nothing-open"])
def test_ctrl_c_with_a_request_still_open_after_the_grace_says_one_line_and_no_traceback(
        open_request: bool, stop: signal.Signals, tmp_path: Path) -> None:
    """Ctrl-C while a client's long poll (``/v1/runs/{id}/wait`` on a run waiting for its hook) is under way: the
    request has ``GRACEFUL_SECONDS`` to end, is then cancelled, and the server says so in one line and exits 130
    (``cli/exit_codes.STOPPED``). It printed uvicorn's ``Cancel 1 running task(s)`` and a page of the request's
    ``CancelledError`` traceback, and exited 0; its client gets the World API's 503 ``server-stopping`` (it got
    uvicorn's plain-text 500). With nothing open it says "stopped", exit 130 too, as any command's Ctrl-C (it said
    nothing and exited 0: tests/cli/test_server_stop.py). SIGTERM (``kill``,
    a process manager's stop) is a Ctrl-C: it ended the process by Python's default, exit -15 (uvicorn raises the
    signal it stopped on again, ``_http/listen.sigterm_as_ctrl_c``)."""
    from awsworld._http.listen import GRACEFUL_SECONDS

    process, url = start_serve(tmp_path, "runtime.test_client_helpers", "--world", "memory", cwd=TESTS)
    try:
        if open_request:
            run_id = httpx.post(f"{url}/v1/client/start", json={
                "workflow": "runtime.test_client_helpers.hook_after_a_step", "args": ["tok-ctrl-c"]}).json()["runId"]
            polled: list[object] = []

            def poll() -> None:
                try:
                    polled.append(httpx.get(f"{url}/v1/runs/{run_id}/wait", params={"timeout": 60}, timeout=70))
                except httpx.HTTPError as error:
                    polled.append(error)

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            time.sleep(1.0)  # (the long poll is under way)
            assert not polled, polled
        process.send_signal(stop)
        code = process.wait(timeout=GRACEFUL_SECONDS + 20)
    finally:
        stop_serve(process)
    said = (tmp_path / "server.log").read_text().splitlines()[1:]  # (after the banner)
    if open_request:
        assert said == [f"awsworld serve: stopped; 1 request(s) still under way after {GRACEFUL_SECONDS} s were cut "
                        "off (their clients got a 503 or a closed connection)", "", "stopped"], said
        assert code == 130
        # The client is told as the World API tells every error (it got uvicorn's plain-text 500 before).
        poller.join(timeout=10)
        [answer] = polled
        assert isinstance(answer, httpx.Response), answer
        assert error_of(answer, 503)["code"] == "server-stopping", answer.text
        assert answer.json()["error"]["message"].startswith("the server is stopping"), answer.text
    else:
        assert (said, code) == (["", "stopped"], 130)


def test_a_web_page_of_another_site_cannot_cancel_a_run_on_a_loopback_server(
        with_workflows: str, tmp_path: Path) -> None:
    """Without a token the server takes only JSON bodies a cross-site form cannot send, but two writes take no
    body: a page elsewhere that knew a run's id cancelled it with a form's POST to 127.0.0.1 (``Host`` a loopback
    name, no CORS needed to send it), and closed its streams. The browser's ``Origin`` is refused now, with nothing
    written; programs (no ``Origin``) are answered as before. Deleting a run takes no body either: refused alike."""
    url = with_workflows
    run_id = httpx.post(f"{url}/v1/client/start", json={
        "workflow": "runtime.test_client_helpers.hook_after_a_step", "args": ["tok-cross-site"]}).json()["runId"]
    form = {"origin": "https://evil.example", "content-type": "application/x-www-form-urlencoded"}
    cancel = httpx.post(f"{url}/v1/client/runs/{run_id}/cancel", headers=form, content=b"")
    assert error_of(cancel, 403)["code"] == "cross-origin", cancel.text
    close = httpx.post(f"{url}/v1/runs/{run_id}/streams/out/close", headers=form, content=b"")
    error_of(close, 403)
    assert httpx.get(f"{url}/v1/runs/{run_id}").json()["status"] != "cancelled"
    assert httpx.get(f"{url}/v1/runs/{run_id}/streams").json() == {"streams": []}
    assert "with 403: sent by a web page of 'https://evil.example'" in (tmp_path / "server.log").read_text()

    mine = httpx.post(f"{url}/v1/client/runs/{run_id}/cancel", content=b"")  # a program: no Origin
    assert mine.status_code == 200 and mine.json()["status"] == "cancelled", mine.text
    # Deleting the ended run (DELETE /v1/runs/{id}, World.delete_run): refused to the page, done for a program.
    assert error_of(httpx.delete(f"{url}/v1/runs/{run_id}", headers=form), 403)["code"] == "cross-origin"
    assert httpx.get(f"{url}/v1/runs/{run_id}").status_code == 200
    deleted = httpx.delete(f"{url}/v1/runs/{run_id}")
    assert deleted.status_code == 200 and deleted.json() == {"deleted": True}, deleted.text
    assert error_of(httpx.get(f"{url}/v1/runs/{run_id}"), 404)["code"] == "run-not-found"


@pytest.fixture(scope="module", params=["memory", "emulator"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``awsworld serve cli.test_serve_cli --world memory|emulator``: a server whose deliveries run this module's
    workflows (``shop.order``), so it publishes that name before it answers."""
    process, url = start_serve(tmp_path_factory.mktemp("served"), "cli.test_serve_cli", "--world", request.param,
                               cwd=TESTS)
    yield url
    stop_serve(process)


async def test_http_client_refuses_a_workflow_name_the_server_does_not_run(served: str) -> None:
    """``HttpClient.start`` reads the served World's publications (``GET /v1/published``, once) and refuses a name no
    consumer registers with the ``WorkflowNotRegisteredError`` a ``Client`` on a World holding those publications
    raises, before anything is written; a published name starts and runs."""
    async with HttpClient(served) as client:
        publications = await client.world.published.read()
        assert [(p.host, p.ahead, "shop.order" in p.workflows) for p in publications] == [
            ("awsworld serve", True, True)]
        with pytest.raises(WorkflowNotRegisteredError) as nope:
            await client.start("shop.nope", "book")
        with pytest.raises(WorkflowNotRegisteredError) as typo:
            await client.start("shop.ordr", "book")
        assert typo.value.suggestions == ["shop.order"]
        assert "by awsworld serve, which consumes this World's queue" in str(nope.value)
        assert "cli.test_serve_cli" in nope.value.modules
        assert (await client.list_runs()).data == []  # nothing was written

        world = MemoryWorld()  # a Client on a World holding the same publications refuses alike
        try:
            for publication in publications:
                await world.published.publish(publication)
            for name, refused in (("shop.nope", nope.value), ("shop.ordr", typo.value)):
                with pytest.raises(WorkflowNotRegisteredError) as direct:
                    await Client(world).start(name, "book")
                assert str(direct.value) == str(refused)
        finally:
            await world.close()

        run = await client.start("shop.order", "book")
        assert await run.result(timeout=60) == "ordered book"
        with pytest.raises(InvalidInputError, match="not over HTTP"):
            await client.world.published.publish(publications[0])


def test_client_start_refuses_an_unknown_name_and_arguments_the_codec_refuses_with_a_400(served: str) -> None:
    """``POST /v1/client/start``: a name the server does not run is a 400 naming the ``workflow`` field, arguments
    the workflow's ``args_codec`` refuses a 400 naming ``args`` (it was a 500 and a traceback in the server's log),
    a field the call does not take (``kwarg``) a 400 naming it (it was dropped unread), a ``runId`` ``.`` or ``..``
    one naming ``runId`` (it started a run no URL could reach); none records a run."""
    start = f"{served}/v1/client/start"
    typo = error_of(httpx.post(start, json={"workflow": "shop.coedd", "args": [1, 2]}), 400)
    assert typo["details"] == {"field": "workflow"} and "did you mean 'shop.coded'?" in str(typo["message"])
    refused = error_of(httpx.post(start, json={"workflow": "shop.coded", "args": [1, "two"]}), 400)
    assert refused["code"] == "invalid-input" and refused["details"] == {"field": "args"}
    assert "cannot be encoded by its codec PydanticCodec" in str(refused["message"])
    assert "\n" not in str(refused["message"])
    misspelt = error_of(httpx.post(start, json={"workflow": "shop.coded", "args": [1], "kwarg": {"b": 2}}), 400)
    assert misspelt["details"] == {"field": "kwarg"} and "the body takes workflow, args, kwargs, runId" in str(
        misspelt["message"]), misspelt
    resume = error_of(httpx.post(f"{served}/v1/client/hooks/resume", json={"token": "t", "paylaod": 1}), 400)
    assert resume["details"] == {"field": "paylaod"}, resume
    for dots in (".", ".."):  # (a run a URL path could not reach: fetch drops the segment, %2e too)
        dotted = error_of(httpx.post(start, json={"workflow": "shop.coded", "args": [1, 2], "runId": dots}), 400)
        assert dotted["details"] == {"field": "runId"} and "a URL path drops" in str(dotted["message"]), dotted
    assert httpx.get(f"{served}/v1/runs", params={"workflowName": "shop.coded"}).json()["data"] == []
    started = httpx.post(start, json={"workflow": "shop.coded", "args": [1, 2]})
    assert started.status_code == 202, started.text
    ended = httpx.get(f"{served}/v1/runs/{started.json()['runId']}/wait", params={"timeout": 30}, timeout=40).json()
    assert (ended["status"], ended["output"]) == ("completed", 3)


async def live_reads_become(url: str, count: int, timeout: float = 30.0) -> None:
    """Poll ``GET /v1/info`` until the server serves ``count`` live stream reads (else fail after ``timeout``)."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as http:
        while True:
            now = (await http.get(f"{url}/v1/info")).json()["liveStreamReads"]
            if now == count:
                return
            assert time.monotonic() < deadline, f"liveStreamReads stayed {now}, not {count}, for {timeout} s"
            await asyncio.sleep(0.05)


async def test_a_live_read_whose_reader_disconnects_ends_on_the_server(served: str) -> None:
    """A live read of a stream that gets no data (its run is running, nobody writes) holds a reader on the server
    until its client goes away: closing the connection (a raw read, as the TypeScript World's) or cancelling
    ``HttpWorld``'s framed read ends the server's reader too (its count drops back), not at the stream's end."""
    run_id = "wrun_01K00000000000000000000DSC"
    async with HttpClient(served) as client:
        await client.world.events.create(run_id, RUN_CREATED)
        await client.world.events.create(run_id, {"eventType": "run_started"})
        await live_reads_become(served, 0)

        async with httpx.AsyncClient(timeout=None) as http, \
                http.stream("GET", f"{served}/v1/runs/{run_id}/streams/strm_idle?startIndex=0") as response:
            assert response.status_code == 200
            await live_reads_become(served, 1)
        await live_reads_become(served, 0)  # the connection closed: the server's reader ended

        async def framed() -> list[bytes]:
            return [chunk async for chunk in client.world.streams.get(run_id, "strm_idle")]

        reader = asyncio.create_task(framed())
        await live_reads_become(served, 1)
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        await live_reads_become(served, 0)
        assert (await client.world.runs.get(run_id)).status == "running"  # (the run went on; only the reads ended)


def test_the_pages_curl_session_runs_on_the_module_it_names(tmp_path: Path) -> None:
    """*How-to: The World over HTTP*'s curl session, on the server it names (``awsworld serve --world memory
    http_orders``, beside the page's example), its bodies as written: the first start's run ends completed and its
    stream holds what it wrote; the second start's run holds the hook the resume body names, which resumes it
    (the resume once answered 404 HookNotFoundError: no workflow of the module made that hook)."""
    page = (TESTS.parent / "docs" / "how-to" / "world-over-http.md").read_text(encoding="utf-8")
    checkout, approve = re.findall(r"-d '(\{\"workflow\": [^']*)'", page)
    [resume] = re.findall(r"-d '(\{\"token\": [^']*)'", page)
    json_body = {"content-type": "application/json"}
    process, url = start_serve(tmp_path, "http_orders", "--world", "memory", cwd=TESTS.parent / "examples" / "how_to")
    try:
        started = httpx.post(f"{url}/v1/client/start", content=checkout, headers=json_body)
        assert started.status_code == 202, started.text
        ended = httpx.get(f"{url}/v1/runs/{started.json()['runId']}/wait", params={"timeout": 30}, timeout=40)
        assert ended.json()["status"] == "completed", ended.text
        stream = httpx.get(f"{url}/v1/runs/{started.json()['runId']}/streams/progress", params={"startIndex": 0})
        assert stream.content == b"packing order-17\n"
        waiting = httpx.post(f"{url}/v1/client/start", content=approve, headers=json_body)
        assert waiting.status_code == 202, waiting.text
        token = quote(json.loads(resume)["token"], safe="")
        deadline = time.monotonic() + 30  # (until the run reached its create_hook: the page's reader types slower)
        while httpx.get(f"{url}/v1/hooks/by-token/{token}").status_code == 404 and time.monotonic() < deadline:
            time.sleep(0.05)
        resumed = httpx.post(f"{url}/v1/client/hooks/resume", content=resume, headers=json_body)
        assert resumed.status_code == 200, resumed.text
        decided = httpx.get(f"{url}/v1/runs/{waiting.json()['runId']}/wait", params={"timeout": 30}, timeout=40)
        assert decided.json()["output"] == {"order": "order-17", "decision": {"approved": True}}, decided.text
    finally:
        stop_serve(process)


def test_a_hook_of_a_typescript_runtime_run_is_refused_from_awsworlds_side_and_nothing_is_recorded(
        loopback: str) -> None:
    """A run of the Workflow SDK's TypeScript runtime (its ``executionContext`` names ``workflowCoreVersion``)
    reads a hook's payload as its own serialized bytes and is woken only through its app. Resumed from awsworld's
    side (``awsworld resume``, ``POST /v1/client/hooks/resume``, ``createClient().resumeHook``), the JSON payload
    was recorded and said delivered, the run went on waiting, and the app's own resume of the hook then failed
    the run at its replay (``Error: Invalid input``: found walking a TypeScript app through the docs). It is a 400
    naming what to do instead, and the run's log is as it was; the runtime's own write (``POST /v1/events``, what
    its ``resumeHook`` sends) still records."""
    context = {"traceCarrier": {}, "workflowCoreVersion": "5.0.0-beta.35", "features": {"encryption": False}}
    writes = [{**RUN_CREATED, "eventData": {**RUN_CREATED["eventData"], "executionContext": context}},
              {"eventType": "run_started", "specVersion": 5},
              {"eventType": "hook_created", "correlationId": "hook_01K0000000000000000000000A", "specVersion": 5,
               "eventData": {"token": "approve-ts"}}]
    for event in writes:
        written = httpx.post(f"{loopback}/v1/events", json={"runId": RUN, "event": event})
        assert written.status_code == 200, written.text
    for body in ({"token": "approve-ts", "payload": {"approved": True}},
                 {"token": "approve-ts", "payload": {"approved": True}, "idempotencyKey": "k-1"}):
        refused = error_of(httpx.post(f"{loopback}/v1/client/hooks/resume", json=body), 400)
        assert (refused["type"], refused["code"], refused["details"]) == (
            "SdkRunHookError", "sdk-run-hook", {"field": "token", "run_id": RUN,
                                                "hook_id": "hook_01K0000000000000000000000A"}), refused
        message = str(refused["message"])
        assert "TypeScript runtime (@workflow/core 5.0.0-beta.35)" in message and "resumeHook(" in message, message
        assert message.endswith("Nothing was recorded"), message
    logged = [e["eventType"] for e in httpx.get(f"{loopback}/v1/runs/{RUN}/events").json()["data"]]
    assert logged == ["run_created", "run_started", "hook_created"]
    bytes_payload = {"__type": "Uint8Array", "data": "ZGV2bFt0cnVlXQ=="}  # devl[true]: the runtime's own resume
    own = httpx.post(f"{loopback}/v1/events", json={"runId": RUN, "event": {
        "eventType": "hook_received", "correlationId": "hook_01K0000000000000000000000A", "specVersion": 5,
        "eventData": {"payload": bytes_payload}}})
    assert own.status_code == 200, own.text


async def _typescript_runtime_run(world: MemoryWorld) -> None:
    """``RUN`` started by the TypeScript runtime (its ``run_created`` names ``@workflow/core``), and running."""
    context = {"workflowCoreVersion": "5.0.0-beta.35"}
    await world.events.create(RUN, {**RUN_CREATED, "eventData": {**RUN_CREATED["eventData"],
                                                                  "executionContext": context}})
    await world.events.create(RUN, {"eventType": "run_started", "specVersion": 5})


async def test_client_resume_fail_and_heartbeat_refuse_a_typescript_runtime_runs_hook() -> None:
    """The same refusal through ``Client`` on the in-memory World (what ``awsworld resume``, ``fail-hook``,
    ``heartbeat-hook``, the UI and the webhook route call): each is ``SdkRunHookError`` and records nothing."""
    from awsworld.world.errors import SdkRunHookError

    world = MemoryWorld()
    client = Client(world)
    await _typescript_runtime_run(world)
    await world.events.create(RUN, {"eventType": "hook_created", "correlationId": "hook_01K0000000000000000000000A",
                                    "specVersion": 5, "eventData": {"token": "approve-ts"}})
    for call in (lambda: client.resume_hook("approve-ts", {"approved": True}),
                 lambda: client.fail_hook("approve-ts", "no"),
                 lambda: client.heartbeat_hook("approve-ts")):
        with pytest.raises(SdkRunHookError, match="resumeHook"):
            await call()
    page = await world.events.list(RUN)
    assert [e.event_type for e in page.data] == ["run_created", "run_started", "hook_created"]


async def test_client_skip_and_wake_refuse_a_typescript_runtime_run_recording_and_sending_nothing() -> None:
    """``Client.skip_wait`` and ``Client.wake`` (what ``awsworld skip``, ``awsworld wake`` call) of a sleeping run
    of the TypeScript runtime: ``SdkRunError`` each, the log as it was and nothing queued (in memory, at once;
    the test above walks the CLI against a real app)."""
    from awsworld.world.errors import SdkRunError

    world = MemoryWorld()
    client = Client(world)
    await _typescript_runtime_run(world)
    await world.events.create(RUN, {"eventType": "wait_created", "correlationId": "wait_01K0000000000000000000000A",
                                    "specVersion": 5, "eventData": {"resumeAt": "2099-01-01T00:00:00.000Z"}})
    queued = world.memory_queue.pending_count()
    with pytest.raises(SdkRunError, match=r"End its sleep from the app: getRun\('wrun_\w+'\)\.wakeUp\(\)"):
        await client.skip_wait(RUN)
    with pytest.raises(SdkRunError, match=r"queue\('__wkf_workflow_wf', \{runId: 'wrun_\w+'\}\)"):
        await client.wake(RUN)
    assert [e.event_type for e in (await world.events.list(RUN)).data] == ["run_created", "run_started",
                                                                           "wait_created"]
    assert world.memory_queue.pending_count() == queued


async def test_rerun_refuses_a_typescript_runtime_run_and_starts_nothing() -> None:
    """``awsworld rerun`` (``Client.rerun``) of a run of the TypeScript runtime started a new run of its workflow
    from awsworld's side: no app behind it, so awsworld's delivery parked or failed it (``UNKNOWN_WORKFLOW``). It
    is ``SdkRunError`` naming the app's ``start``, and no run is made."""
    from awsworld.world.errors import SdkRunError

    world = MemoryWorld()
    await _typescript_runtime_run(world)
    await world.events.create(RUN, {"eventType": "run_completed", "specVersion": 5,
                                    "eventData": {"output": RUN_CREATED["eventData"]["input"]}})
    with pytest.raises(SdkRunError, match=r"start\(workflow, args\) from 'workflow/api'"):
        await Client(world).rerun(RUN)
    assert [run.run_id for run in (await world.runs.list()).data] == [RUN]
