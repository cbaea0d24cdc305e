"""Every example module under ``examples/`` (what the docs' code blocks include) imports and runs: its ``main()``
is awaited as a user would run the file, in memory (``WorkflowTestEnv``), and the deploy examples on the
embedded emulator (moto's server through ``LocalAWS``), with the environment a deployed stack's client has.

The examples' own test files (``test_*.py``) run in ``test_example_tests.py``, as a user's test session would."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import importlib
import inspect
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from awsworld.cli.dev import environment
from awsworld.local import LocalAWS, MotoServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# Examples that talk to a stack: run on the emulator, with the variables `awsworld dev` exports.
ON_THE_EMULATOR = {"operate/start_on_stack.py", "how_to/local_aws.py", "how_to/http_client.py",
                   "how_to/step_secrets.py"}


def example_files() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*.py") if not p.name.startswith("test_"))


def load(path: Path) -> ModuleType:
    """Import ``path`` as its own top-level module, its folder on ``sys.path`` (as ``python path`` would, so a
    sibling import such as ``from checkout import checkout`` works)."""
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(path.stem)


@pytest.fixture
def example_path() -> Iterator[None]:
    saved = list(sys.path)
    yield
    sys.path[:] = saved


def test_module_names_are_unique_across_the_folder() -> None:
    """Every example is importable by its file name in one process (and one flat folder of a user's project)."""
    names = [p.stem for p in EXAMPLES.rglob("*.py")]
    assert sorted(names) == sorted(set(names))


@pytest.mark.parametrize("path", [p for p in example_files() if str(p.relative_to(EXAMPLES)) not in ON_THE_EMULATOR],
                         ids=lambda p: str(p.relative_to(EXAMPLES)))
async def test_the_example_runs_in_memory(path: Path, example_path: None) -> None:
    module = load(path)
    main: Any = getattr(module, "main", None)
    if main is None:
        return  # a module of definitions only (imported, so its decorators ran and its names registered)
    assert inspect.iscoroutinefunction(main), f"{path}: main() is the example's entry point, an async function"
    await main()


async def test_starting_a_run_on_a_stack_from_python(monkeypatch: pytest.MonkeyPatch, example_path: None) -> None:
    """The deploy page's client, against the emulator serving the demo's ``order.process`` as the flow function
    would: the environment is what the stack's ClientEnvironment output (and ``awsworld dev``) gives."""
    import awsworld.examples.order  # noqa: F401  (the workflow the stack's Modules name)

    async with LocalAWS() as local:
        for name, value in environment(local.config, "http://127.0.0.1:1/webhooks/").items():
            monkeypatch.setenv(name, value)
        module = load(EXAMPLES / "operate" / "start_on_stack.py")
        result = await module.main()
    assert result == {"order": "A-17", "reserved": 2, "receipt": "receipt-A-17", "boxes": 2,
                      "tracking": "tracking-A-17"}


async def test_the_emulator_example_runs(example_path: None) -> None:
    """``LocalAWS`` from Python: it provisions, serves the workflow's deliveries in this process, and stops."""
    module = load(EXAMPLES / "how_to" / "local_aws.py")
    assert await module.main() == "hello emulator"


async def test_a_step_reads_a_secret_and_a_setting_through_powertools(
        moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch, example_path: None) -> None:
    """The how-to's step on moto's server: its own boto3 (Powertools' providers) follows the process's environment,
    as the flow function's does on Lambda and as it does under ``awsworld dev`` (which leaves that environment
    alone), and signs with the secret it read. Then the secret is deleted on the server and the step signs with
    it all the same: Powertools served it from its cache, across runs of the same process, without a request."""
    from aws_lambda_powertools.utilities import parameters

    from awsworld.testing import WorkflowTestEnv

    for name, value in {"AWS_ENDPOINT_URL": moto_server.endpoint_url, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "eu-west-1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    parameters.clear_caches()  # the providers (and their boto3 clients) are made on first use, from this env
    try:
        module = load(EXAMPLES / "how_to" / "step_secrets.py")
        charged = await module.main()
        body = '{"order": "A-17", "cents": 1250}'
        signature = hmac.new(b"example-signing-key", body.encode(), hashlib.sha256).hexdigest()
        assert charged == {"url": "https://payments.example/charges", "body": body, "signature": signature}
        async with WorkflowTestEnv() as env:  # the secret and the parameter are gone from the server now
            assert await (await env.client.start(module.charge, "A-17", 1250)).result() == charged
    finally:
        parameters.clear_caches()

    # The page's least-privilege policy for this step: the two reads it makes, on the two names it reads.
    policy = json.loads((EXAMPLES / "how_to" / "steps-policy.json").read_text())
    grants = {(s["Action"], s["Resource"].split(":", 5)[5]) for s in policy["Statement"] if s["Effect"] == "Allow"}
    assert grants == {("secretsmanager:GetSecretValue", f"secret:{module.SIGNING_KEY}-??????"),
                      ("ssm:GetParameter", f"parameter{module.ENDPOINT}")}


@pytest.mark.parametrize("world", ["memory", "emulator"])
async def test_a_run_over_http(world: str, tmp_path: Path, example_path: None) -> None:
    """``HttpClient`` against ``awsworld serve`` as a process (the in-memory World, then the embedded emulator), which
    imports the example's workflow module: the run's result and its stream come back over HTTP."""
    ready = tmp_path / "url.txt"
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "awsworld.cli", "serve", "--world", world, "--port", "0", "--ready-file", str(ready),
        "http_orders", cwd=EXAMPLES / "how_to", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not (ready.exists() and ready.read_text().strip()):
            assert server.returncode is None, (await server.communicate())[0]
            assert time.monotonic() < deadline, "awsworld serve did not write its URL"
            await asyncio.sleep(0.1)
        module = load(EXAMPLES / "how_to" / "http_client.py")
        assert await module.main(ready.read_text().strip()) == [b"packing order-17\n"]
    finally:
        if server.returncode is None:
            server.terminate()
        await asyncio.wait_for(server.communicate(), timeout=30)
