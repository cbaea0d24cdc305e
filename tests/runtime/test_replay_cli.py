"""``awsworld export`` and ``awsworld replay``, run as commands: a stored run replayed against changed code (a module
that redefines the workflow under the same name) reports the seeded divergence and exits 1; the same code exits
0; ``--workflow`` with a name the modules do not register exits 2 (not "0 replayed"); nothing is written to the
run."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from awsworld import create_hook, step, workflow
from awsworld.client.replay import load_export, replay_events

AWSWORLD = str(Path(sys.executable).with_name("awsworld"))


@pytest.fixture(scope="module")
def e2e_backend() -> str:
    """On LocalAWS (moto): the CLI reads the run through a deployed-style config (``world.config``: endpoint,
    table, bucket, queue), in another process."""
    return "aws"


@step(name="cli_demo.charge")
async def charge(order: str, amount: float) -> str:
    return f"receipt {order} {amount}"


@workflow(name="cli_demo.checkout")
async def checkout(order: str) -> str:
    receipt = await charge(order, 42.5)
    await create_hook(token=f"cli-ship:{order}")
    return receipt


CODE = '''
from awsworld import create_hook, step, workflow
from awsworld.client.replay import load_export, replay_events


@step(name="cli_demo.charge")
async def charge(order: str, amount: float) -> str:
    return f"receipt {{order}} {{amount}}"

@workflow(name="cli_demo.checkout")
async def checkout(order: str) -> str:
    receipt = await charge(order, {amount})
    await create_hook(token=f"cli-ship:{{order}}")
    return receipt
'''


async def _awsworld(*args: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(AWSWORLD, *args, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.STDOUT)
    output, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, output.decode()


async def test_awsworld_replay_reports_a_seeded_divergence(e2e, tmp_path: Path) -> None:
    order = f"A-{uuid.uuid4().hex[:4]}"
    run = await e2e.start(checkout, order)
    await e2e.hook_ready(f"cli-ship:{order}", run)  # in flight, charged
    await e2e.idle()
    (tmp_path / "shop_same.py").write_text(textwrap.dedent(CODE.format(amount="42.5")))
    (tmp_path / "shop_changed.py").write_text(textwrap.dedent(CODE.format(amount="40.0")))
    config = e2e.world.config
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS", "AWSWORLD"))}
    env.update(PYTHONPATH=str(tmp_path), AWS_ENDPOINT_URL=config.endpoint_url, AWSWORLD_TABLE=config.table_name,
               AWSWORLD_BUCKET=config.bucket_name, AWSWORLD_QUEUE_URL=config.queue_url or "",
               AWS_ACCESS_KEY_ID="awsworldlocal", AWS_SECRET_ACCESS_KEY="local", AWS_REGION="us-east-1")
    if config.dynamodb_endpoint_url:
        env["AWS_ENDPOINT_URL_DYNAMODB"] = config.dynamodb_endpoint_url
    before = len(await run.events())

    code, output = await _awsworld("export", run.run_id, "-o", "history.jsonl", env=env, cwd=tmp_path)
    assert code == 0, output
    assert (tmp_path / "history.jsonl").read_text().count("\n") == before
    for events in load_export(tmp_path / "history.jsonl"):  # the pytest form (docs_changing_code.md)
        result = replay_events(events)
        assert result.ok, result.describe()

    offline = {k: v for k, v in env.items() if not k.startswith(("AWS", "AWSWORLD"))}  # a file needs no AWS
    code, output = await _awsworld("replay", "--file", "history.jsonl", "-m", "shop_changed", env=offline,
                                   cwd=tmp_path)
    assert code == 1, output
    assert f"run {run.run_id} (cli_demo.checkout): DIVERGED step 1 (event 3): the log has charge('{order}', 42.5), " \
           f"the code called charge('{order}', 40.0)" in output, output
    assert "1 run(s) replayed, 1 diverged" in output

    code, output = await _awsworld("replay", "--file", "history.jsonl", "-m", "shop_same", env=offline, cwd=tmp_path)
    assert code == 0, output
    assert f"run {run.run_id} (cli_demo.checkout): ok, {before} events replayed" in output

    code, output = await _awsworld("replay", run.run_id, "-m", "shop_changed", env=env, cwd=tmp_path)
    assert code == 1 and f"the code called charge('{order}', 40.0)" in output, output
    code, output = await _awsworld("replay", "--workflow", "cli_demo.checkout", "-m", "shop_changed", env=env,
                                   cwd=tmp_path)
    assert code == 1 and f"run {run.run_id} (cli_demo.checkout): DIVERGED" in output, output
    code, output = await _awsworld("replay", "--workflow", "cli_demo.chekout", "-m", "shop_changed", env=env,
                                   cwd=tmp_path)  # a typo listed no runs and passed ("0 run(s) replayed", exit 0)
    assert code == 2 and "did you mean 'cli_demo.checkout'?" in output and "replayed" not in output, output
    assert len(await run.events()) == before, "replay writes nothing"
    assert await run.status() == "running"


async def test_awsworld_replay_says_a_diverging_run_is_pinned_and_what_that_means(tmp_path: Path) -> None:
    """A run pinned to its deployment (the default) goes on on that deployment's code whatever is deployed next:
    its divergence from changed code says so (``awsworld upgrade`` would not move it), where it read as a run the
    deploy would break. An unpinned run's, and an ended run's, read as before. ``--file``: no AWS needed."""
    from awsworld.client.replay import export_lines
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv(deployment="v1") as env:
        run = await env.client.start(checkout, "P-1")
        await run.wait_for_hook("cli-ship:P-1")
        lines = export_lines(await run.events())
    (tmp_path / "pinned.jsonl").write_text("".join(f"{line}\n" for line in lines))
    (tmp_path / "shop_changed.py").write_text(textwrap.dedent(CODE.format(amount="40.0")))
    offline = {k: v for k, v in os.environ.items() if not k.startswith(("AWS", "AWSWORLD"))}
    offline["PYTHONPATH"] = str(tmp_path)
    code, output = await _awsworld("replay", "--file", "pinned.jsonl", "-m", "shop_changed", env=offline,
                                   cwd=tmp_path)
    assert (f"the code called charge('P-1', 40.0) [pinned to deployment v1: it goes on on that code, which a deploy "
            f"does not change; `awsworld upgrade {run.run_id}` would not move it to this code]\n") in output, output
    # A deploy leaves it on its code: not counted, so a check before the deploy passes (it failed every code change
    # while pinned runs were in flight); counted when asked, the check before `awsworld upgrade`.
    assert code == 0 and ("1 run(s) replayed, 1 diverged or could not be replayed; 1 of them pinned to their "
                          "deployment, which a deploy leaves on their own code: not counted") in output, output
    code, output = await _awsworld("replay", "--file", "pinned.jsonl", "-m", "shop_changed", "--include-pinned",
                                   env=offline, cwd=tmp_path)
    assert code == 1 and output.endswith("1 run(s) replayed, 1 diverged or could not be replayed\n"), output
