"""The LocalStack launcher and ``LocalAWS(sqs_s3="localstack")``: loopback only, its files under a root of its
own, told it is not in a container, stopped by its pid, gone with the process that started it, and no moto in
the path of a World on DynamoDB Local plus LocalStack."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from awsworld.local import DynamoDBLocal, LocalAWS, LocalStack, LocalStackError
from awsworld.local import localstack_server as launcher
from awsworld.local.emulator_process import STOP_GRACE_SECONDS
from tied import running, tied  # tests/tied.py (tests/ is on sys.path)

from .test_servers import is_loopback, listening_addresses


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(entry.split("=", 1) for entry in raw.decode().split("\0") if "=" in entry)




def _refused(port: int) -> bool:
    try:
        socket.create_connection((launcher.HOST, port), timeout=2).close()
    except OSError:
        return True
    return False


def test_localstack_listens_on_loopback_only(localstack: LocalStack) -> None:
    addresses = listening_addresses(localstack.port)
    assert addresses and all(is_loopback(a) for a in addresses), addresses


def test_localstack_is_told_it_is_not_in_a_container_and_keeps_to_its_root(localstack: LocalStack) -> None:
    """The settings that keep it on this machine reach the process itself (``/proc/<pid>/environ``)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc: Linux only")
    assert localstack.pid is not None
    env = _environ(localstack.pid)
    assert env["OVERRIDE_IN_DOCKER"] == "0" and env["DOCKER_BRIDGE_IP"] == "127.0.0.1"
    assert env["GATEWAY_LISTEN"] == f"127.0.0.1:{localstack.port}" and env["DNS_ADDRESS"] == "0"
    assert env["SERVICES"] == "sqs,s3,kms" and env["DISABLE_EVENTS"] == "1" and env["SKIP_SSL_CERT_DOWNLOAD"] == "1"
    root = Path(env["FILESYSTEM_ROOT"])
    assert root.is_dir() and root.name.startswith("awsworld-localstack-")
    assert any(root.iterdir()), "LocalStack writes its files under FILESYSTEM_ROOT"


def test_the_settings_always_pin_loopback() -> None:
    env = launcher.environment(4566, Path("/tmp/x"), ("sqs",))
    assert env["OVERRIDE_IN_DOCKER"] == "0"
    assert env["DOCKER_BRIDGE_IP"] == env["GATEWAY_LISTEN"].split(":")[0] == "127.0.0.1"
    assert env["LOCALSTACK_HOST"] == "127.0.0.1:4566" and env["SERVICES"] == "sqs"


EXIT_PROBE = """
import atexit, os
_fd = os.open({path!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
atexit.register(os.write, _fd, b"exit handlers ran\\n")
class _Collected:  # dropped when the interpreter's finalization clears this module
    def __del__(self, write=os.write, fd=_fd):
        write(fd, b"finalization collected\\n")
_probe = _Collected()
"""
"""A ``sitecustomize`` for LocalStack's interpreter (by ``PYTHONPATH``): it records whether the exit handlers ran
and whether the interpreter's finalization ran after them."""


async def test_local_aws_on_dynamodb_local_and_localstack_starts_no_moto_and_stops_its_localstack(
        dynamodb_local: DynamoDBLocal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The launcher ends LocalStack after its own shutdown and exit handlers, without the interpreter's
    # finalization (localstack_launch.py: that collection took 3 to over 10 s, and a stop was often killed).
    site, probe = tmp_path / "site", tmp_path / "exit.txt"
    site.mkdir()
    (site / "sitecustomize.py").write_text(EXIT_PROBE.format(path=str(probe)))
    monkeypatch.setenv("PYTHONPATH", str(site))
    async with LocalAWS("dynamodb-local", sqs_s3="localstack", dynamodb_local=dynamodb_local) as local:
        assert local._moto is None, "no moto server on this backend"
        assert local.dynamodb_endpoint_url == dynamodb_local.endpoint_url
        assert local.endpoint_url != dynamodb_local.endpoint_url
        owned = local._localstack
        assert owned is not None and owned.pid is not None
        pid, port = owned.pid, owned.port
        world = local.world
        assert world.config.queue_url and f":{port}/" in world.config.queue_url
        sqs = await world.clients.sqs()
        assert world.config.queue_url in (await sqs.list_queues())["QueueUrls"]
        root = Path(_environ(pid)["FILESYSTEM_ROOT"]) if sys.platform.startswith("linux") else None
    assert not running(pid), "stopped by its pid"
    assert _refused(port)
    assert root is None or not root.exists(), "its temporary root is removed"
    assert dynamodb_local.running, "the shared DynamoDB Local is left running"
    # Its shutdown ended in the grace: the exit handlers ran and no finalization followed (the old launcher's
    # interpreter collected after them). Or, on a loaded machine, the shutdown outlasted the grace and the process
    # was killed (nothing ran, nothing to judge): ci71 saw that under -n 3.
    assert probe.read_text() in ("exit handlers ran\n", ""), "its interpreter collected after its exit handlers"


def test_localstack_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    """However the parent dies (here SIGKILL: no cleanup ran), LocalStack sees its stdin close and exits."""
    script = ("from awsworld.local import LocalStack\n"
              "server = LocalStack().start()\n"
              "print(server.pid, server.port, flush=True)\n"
              "import time; time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line, "the parent did not start LocalStack"
        pid, port = (int(part) for part in line.split())
        root = Path(_environ(pid)["FILESYSTEM_ROOT"]) if sys.platform.startswith("linux") else None
        assert running(pid)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
    deadline = time.monotonic() + STOP_GRACE_SECONDS + 10
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if running(pid):  # clean up before failing: this test must not leave it running
        os.killpg(pid, signal.SIGKILL)
        pytest.fail("LocalStack outlived the process that started it")
    assert _refused(port)
    if root is not None:  # a killed parent cannot remove the root: the next start makes a new one
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def test_missing_localstack_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(launcher.ENV_PYTHON, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launcher, "__file__", str(tmp_path / "pkg" / "localstack_server.py"))
    with pytest.raises(LocalStackError, match=r"localstack-requirements\.txt") as error:
        launcher.find_python()
    assert "python3.13 -m venv .venv-localstack" in str(error.value)


def test_a_configured_python_that_is_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(launcher.ENV_PYTHON, "/nonexistent/python")
    with pytest.raises(LocalStackError, match="AWSWORLD_LOCALSTACK_PYTHON=/nonexistent/python is not a file"):
        LocalStack().start()


def test_unknown_sqs_s3_engine_is_rejected() -> None:
    with pytest.raises(ValueError, match="sqs_s3 must be one of"):
        LocalAWS(sqs_s3="dynamodb-local")  # type: ignore[arg-type]


DEV_WORKFLOWS = '''
from awsworld import step, workflow


@step(name="lsdev.grow")
async def grow(text: str) -> str:
    return text * 2


@workflow(name="lsdev.big")
async def big(text: str) -> int:
    return len(await grow(text))
'''


def test_awsworld_dev_runs_on_localstack(tmp_path: Path) -> None:
    """``awsworld dev --sqs-s3 localstack``: the exports point SQS and S3 at LocalStack (DynamoDB at moto), and a
    run whose step result lives in S3 (past the inline limit) completes through them; Ctrl-C stops LocalStack."""
    (tmp_path / "lsdev.py").write_text(DEV_WORKFLOWS)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS", "AWSWORLD"))}
    dev = subprocess.Popen([sys.executable, "-m", "awsworld.cli", "dev", "lsdev", "--sqs-s3", "localstack"],
                           cwd=tmp_path, env=clean, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           preexec_fn=tied())
    banner: list[str] = []
    try:
        assert dev.stdout is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (banner and banner[-1].startswith("serving deliveries")):
            line = dev.stdout.readline()
            if not line:
                raise AssertionError("awsworld dev exited:\n" + "".join(banner))
            banner.append(line)
        env = dict(clean)
        for line in banner:
            if line.startswith("export "):
                name, _, value = line.removeprefix("export ").strip().partition("=")
                env[name] = value
        assert env["AWS_ENDPOINT_URL"] != env["AWS_ENDPOINT_URL_DYNAMODB"], banner
        assert f":{env['AWS_ENDPOINT_URL'].rsplit(':', 1)[1]}/" in env["AWSWORLD_QUEUE_URL"], "LocalStack's queue"
        text = "x" * (20 * 1024)  # doubled: 40 KB, past AWSWORLD_INLINE_VALUE_LIMIT
        done = subprocess.run([sys.executable, "-m", "awsworld.cli", "start", "lsdev.big", f'["{text}"]', "--wait",
                               "60"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[1] == str(2 * len(text)), done.stdout
        port = int(env["AWS_ENDPOINT_URL"].rsplit(":", 1)[1])
    finally:
        dev.send_signal(signal.SIGINT)
        out, _ = dev.communicate(timeout=60)
    assert dev.returncode == 0, "".join(banner) + out
    assert _refused(port), "dev stopped its LocalStack"
