"""Against ``awsworld dev`` as a process, with the CLI and a Python client as processes: a mistyped workflow name is
refused at ``start`` (dev publishes its names before its first delivery), with the modules loaded and the nearest
name, exit 2; arguments that do not fit the workflow's annotations are refused (exit 2, naming the parameter, the
type and the value), and the CLI reads its JSON through the annotations (an ISO string becomes a ``datetime``);
without the workflow's code the CLI cannot check them, and the run's first delivery fails it instead."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from .test_cli import WORKFLOWS, Dev, Runner

MORE = '''

import datetime


@workflow(name="clitest.order")
async def order(order_id: str, items: list[str], amount: float) -> str:
    return f"{order_id} {len(items)} {amount!r}"


@workflow(name="clitest.when")
async def when(at: datetime.datetime, pair: tuple[int, int]) -> str:
    return f"{type(at).__name__} {at.isoformat()} {type(pair).__name__} {sum(pair)}"
'''


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    project = tmp_path_factory.mktemp("names")
    (project / "clitest.py").write_text(textwrap.dedent(WORKFLOWS) + MORE)
    runner = Runner(tmp_path_factory.mktemp("runner"))
    server = Dev(project, project / "state", [runner])
    yield server
    server.stop()
    runner.close()


def codeless(dev: Dev) -> dict[str, str]:
    """dev's exports without AWSWORLD_MODULES: a shell (or a deployed stack's client) without the workflows' code."""
    return {k: v for k, v in dev.env.items() if k != "AWSWORLD_MODULES"}


def test_a_mistyped_name_is_refused_at_start_with_the_nearest_names(dev: Dev) -> None:
    with_code = dev("start", "clitest.summ", "[1, 2]")
    line = with_code.one_line_error(2)
    assert "no workflow named 'clitest.summ' is registered in this process" in line, line
    assert "did you mean 'clitest.sum'?" in line

    runner = dev.runners[0]
    without_code = runner(("start", "clitest.summ", "[1, 2]", "--run-id", "names-typo"), codeless(dev), dev.cwd)
    line = without_code.one_line_error(2)
    assert "no workflow named 'clitest.summ' is registered by awsworld dev, which consumes this World's queue" in line
    assert "(workflows from clitest)" in line and "did you mean 'clitest.sum'?" in line, line
    assert "no such run" in dev("describe", "names-typo").one_line_error(1), "nothing recorded"

    script = textwrap.dedent("""
        import asyncio
        from awsworld import Client
        from awsworld.aws import AWSWorld
        from awsworld.authoring.definitions import WorkflowNotRegisteredError

        async def main():
            async with AWSWorld() as world:
                client = Client(world)
                try:
                    await client.start("clitest.summ", 1, 2)
                except WorkflowNotRegisteredError as error:
                    print("refused:", error.suggestions)
                run = await client.start("clitest.sum", 1, 2)
                print("result:", await run.result(timeout=30))

        asyncio.run(main())
    """)
    python = subprocess.run([sys.executable, "-c", script], env=codeless(dev), cwd=dev.cwd, capture_output=True,
                            text=True, timeout=120)
    assert python.returncode == 0, python
    assert python.stdout.splitlines() == ["refused: ['clitest.sum']", "result: 3"], python


def test_arguments_that_do_not_fit_are_refused_and_json_is_read_through_the_annotations(dev: Dev) -> None:
    refused = dev("start", "clitest.order", '["T-1", "abc", "12"]', "--run-id", "names-bad-args")
    line = refused.one_line_error(2)
    assert "workflow 'clitest.order': parameter 'items' expects list[str], got 'abc' (str)" in line, line
    assert "hint: the workflow takes clitest.order(order_id, items, amount)" in line
    assert "no such run" in dev("describe", "names-bad-args").one_line_error(1), "nothing recorded"

    typed = dev("start", "clitest.when", '["2025-01-02T03:04:05+00:00", [1, 2]]', "--wait", "30")
    assert typed.code == 0, typed
    assert typed.out.splitlines()[1] == '"datetime 2025-01-02T03:04:05+00:00 tuple 3"', typed
    good = dev("start", "clitest.order", '["T-1", ["a", "b"], 12]', "--wait", "30")
    assert good.code == 0 and good.out.splitlines()[1] == '"T-1 2 12.0"', good


def test_without_the_code_the_first_delivery_fails_a_run_whose_arguments_do_not_fit(dev: Dev) -> None:
    runner = dev.runners[0]
    started = runner(("start", "clitest.order", '["T-1", ["a"], "12"]', "--wait", "30"), codeless(dev), dev.cwd)
    assert started.code == 1, started
    assert "parameter 'amount' expects float, got '12' (str)" in started.err, started
