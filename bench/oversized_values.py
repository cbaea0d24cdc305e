"""What a value over ``AWSWORLD_MAX_VALUE_BYTES`` costs in memory before it is refused.

A value past the bound ends in ``PayloadTooLargeError`` (or the step's ``ValueTooLargeError``); what it must not do
is cost many times its size first: on Lambda (a few GB at most) a 500 MB step result that peaked at 2.4-5.1 GB was
an out-of-memory kill, not the typed error. For each path a user value takes (a step's result, a workflow's input
given to ``start``, a step's input, a child workflow's input, a workflow's return value, a hook's resume payload, a
stream chunk, a queue payload), on the in-memory World and on the AWS World (``LocalAWS`` on moto), this prints the
peak traced memory (``tracemalloc``) from just before the value is built until the refusal, as a multiple of the
value's size (the UTF-8 bytes of its JSON; a chunk: its bytes). The value itself counts, so a string value's floor
is 1.0x. A queue payload is built as the JSON data it is (``bytes``: their envelope's base64 text, a floor of 1.0x,
not 0.75x), and a records chunk as the text JSON's encoder makes of them: what a user's code does before the World
is not counted.

moto runs in a process of its own, so what it stores or parses is not counted: on Lambda it is not there either.
The bound is small (``--bound``, 4 MiB by default) so every figure takes seconds: a value just over it and one
of 8x it, of three kinds: ASCII text (a ``str``), ``bytes`` (base64 in the log) and records (a list of dicts).

Run: ``python bench/oversized_values.py`` (``--world memory`` or ``--world aws`` for one World only).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

from awsworld import ChildWorkflowError, StepError, create_hook, get_writable, step, workflow
from awsworld.authoring.errors import ValueTooLargeError, WorkflowRunFailedError
from awsworld.durable import serde
from awsworld.local import LocalAWS, MotoServer
from awsworld.settings import Settings
from awsworld.testing import WorkflowTestEnv
from awsworld.world.errors import PayloadTooLargeError

MIB = 1024 * 1024
KINDS = ("text", "bytes", "records")
RECORD = {"id": 0, "name": "a record of some length", "tags": ["alpha", "beta"], "score": 0.5}


def make_value(kind: str, size: int) -> Any:
    """A value of ``kind`` whose serialized JSON is about ``size`` bytes (``json_size`` says exactly)."""
    if kind == "text":
        return "x" * size
    if kind == "bytes":
        return bytes(size * 3 // 4)  # base64 makes it 4/3 as long
    record_bytes = len(serde.to_json_text(RECORD)) + 1
    return [{**RECORD, "id": i} for i in range(size // record_bytes)]


def make_json_data(kind: str, size: int) -> Any:
    """A value of ``kind`` as JSON data, the form a queue payload takes (what ``serde.dumps`` would make of
    ``make_value``'s), built as such: ``bytes`` as their envelope around a base64 text of its length."""
    if kind != "bytes":
        return make_value(kind, size)  # (a text, a list of dicts: JSON data as they are)
    return {"$t": "bytes", "v": "A" * (size - len('{"$t":"bytes","v":""}'))}


def json_size(value: Any) -> int:
    return len(serde.to_json_text(value).encode("utf-8"))


SIZES: dict[str, int] = {}
"""kind -> the size the workflows below build their values at (set before each run: values are built inside the
measured window, by the step or the workflow, not passed in)."""


@step(name="oversized.result", max_retries=0)
async def oversized_result(kind: str) -> Any:
    return make_value(kind, SIZES[kind])


@workflow(name="oversized.step-result")
async def step_result(kind: str) -> str:
    try:
        await oversized_result(kind)
    except StepError as error:
        return error.error_type
    return "accepted"


@workflow(name="oversized.returns")
async def returns(kind: str) -> Any:
    return make_value(kind, SIZES[kind])


@workflow(name="oversized.takes")
async def takes(value: Any) -> int:
    return 0


@step(name="oversized.input")
async def takes_input(value: Any) -> int:
    return 0


@workflow(name="oversized.step-input")
async def step_input(kind: str) -> str:
    try:
        await takes_input(make_value(kind, SIZES[kind]))
    except ValueTooLargeError:
        return "refused"
    return "accepted"


@workflow(name="oversized.child-input")
async def child_input(kind: str) -> str:
    try:
        await takes(make_value(kind, SIZES[kind]))
    except ChildWorkflowError as error:
        return error.error_type or "failed"
    return "accepted"


@workflow(name="oversized.hooked")
async def hooked(token: str) -> str:
    async with create_hook(token=token) as hook:
        await hook
    return "resumed"


@step(name="oversized.chunk")
async def write_chunk(kind: str) -> str:
    size = SIZES[kind]
    # (records: a chunk is the text a step made of them, with JSON's own encoder, which makes no copy of them)
    chunk = "x" * size if kind == "text" else bytes(size) if kind == "bytes" else json.dumps(
        make_value(kind, size), separators=(",", ":"))
    try:
        await get_writable("big").write(chunk)
    except PayloadTooLargeError:
        return "refused"
    return "accepted"


@workflow(name="oversized.streams")
async def streams(kind: str) -> str:
    return await write_chunk(kind)


class Paths:
    """Each path a value takes, as a coroutine that builds the value of a kind and sends it (refused)."""

    def __init__(self, client: Any, world: Any) -> None:
        self.client = client
        self.world = world
        self.hooks = 0

    async def step_result(self, kind: str) -> None:
        assert await (await self.client.start(step_result, kind)).result(timeout=300) == "ValueTooLargeError"

    async def step_input(self, kind: str) -> None:
        assert await (await self.client.start(step_input, kind)).result(timeout=300) == "refused"

    async def child_input(self, kind: str) -> None:
        outcome = await (await self.client.start(child_input, kind)).result(timeout=300)
        assert outcome == "ValueTooLargeError", outcome

    async def start_input(self, kind: str) -> None:
        try:
            await self.client.start(takes, make_value(kind, SIZES[kind]))
        except PayloadTooLargeError:
            return
        raise AssertionError("the input was accepted")

    async def return_value(self, kind: str) -> None:
        try:
            await (await self.client.start(returns, kind)).result(timeout=300)
        except WorkflowRunFailedError as failed:
            assert failed.code == "VALUE_TOO_LARGE", failed
            return
        raise AssertionError("the return value was accepted")

    async def hook_payload(self, kind: str) -> None:
        self.hooks += 1
        token = f"oversized-{os.getpid()}-{self.hooks}"
        await (await self.client.start(hooked, token)).wait_for_hook(token, timeout=60)
        gc.collect()
        tracemalloc.reset_peak()  # the run is waiting: measure the resume alone
        try:
            await self.client.resume_hook(token, make_value(kind, SIZES[kind]))
        except PayloadTooLargeError:
            return
        raise AssertionError("the payload was accepted")

    async def stream_chunk(self, kind: str) -> None:
        assert await (await self.client.start(streams, kind)).result(timeout=300) == "refused"

    async def queue_payload(self, kind: str) -> None:
        try:
            # a queue payload is JSON data (bytes as the log keeps them), built as such
            await self.world.queue("__wkf_workflow_oversized", make_json_data(kind, SIZES[kind]))
        except PayloadTooLargeError:
            return
        raise AssertionError("the payload was accepted")

    def all(self) -> dict[str, Callable[[str], Awaitable[None]]]:
        return {"step result": self.step_result, "workflow input (start)": self.start_input,
                "step input": self.step_input, "child workflow input": self.child_input,
                "workflow return value": self.return_value, "hook resume payload": self.hook_payload,
                "stream chunk": self.stream_chunk, "queue payload": self.queue_payload}


async def peak_multiple(send: Callable[[str], Awaitable[None]], kind: str, size: int) -> float:
    """Peak traced memory while ``send`` builds and sends a value of ``kind`` of about ``size`` bytes, over the
    value's JSON size (``send`` may reset the peak itself once what it needs before the value is in place)."""
    SIZES[kind] = size
    exact = json_size(make_value(kind, size))
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    await send(kind)
    peak = tracemalloc.get_traced_memory()[1]
    return (peak - base) / exact


def own_multiple(kind: str, size: int) -> float:
    """What the value itself takes while it is built, over its JSON size: the floor of every path's figure."""
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    value = make_value(kind, size)
    peak = tracemalloc.get_traced_memory()[1]
    return (peak - base) / json_size(value)


async def measure(world_name: str, paths: Paths, bound: int, only: str | None) -> None:
    sizes = {"just over": bound + 64 * 1024, "8x": 8 * bound}
    print(f"\n{world_name}: peak traced memory / value size (bound {bound // 1024} KiB)")
    print(f"  {'path':<26}" + "".join(f"{kind + ' ' + label:>18}" for label in sizes for kind in KINDS))
    print(f"  {'(the value itself)':<26}" + "".join(f"{own_multiple(kind, size):>17.2f}x" for size in sizes.values()
                                                  for kind in KINDS))
    for name, send in paths.all().items():
        if only and only not in name:
            continue
        await peak_multiple(send, "text", sizes["just over"])  # warm: imports and caches are not the value's
        cells = []
        for size in sizes.values():
            for kind in KINDS:
                cells.append(f"{await peak_multiple(send, kind, size):>17.2f}x")
        print(f"  {name:<26}" + "".join(cells), flush=True)


class MotoElsewhere(MotoServer):
    """moto's server in a child process: what it stores is not traced here (``LocalAWS(moto=...)``)."""

    def __init__(self) -> None:
        super().__init__()
        code = ("import sys, time\nfrom awsworld.local import MotoServer\nserver = MotoServer().start()\n"
                "print(server.port, flush=True)\nsys.stdin.read()\n")
        self.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self._remote_port = int(self.process.stdout.readline())

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._remote_port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(timeout=30)


async def on_memory(bound: int, only: str | None) -> None:
    async with WorkflowTestEnv() as env:
        await measure("in-memory World", Paths(env.client, env.world), bound, only)


async def on_aws(bound: int, only: str | None) -> None:
    moto = MotoElsewhere()
    try:
        async with LocalAWS("moto", moto=moto) as local:
            await measure("AWS World (moto in its own process)", Paths(local.client, local.world), bound, only)
    finally:
        moto.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bound", type=int, default=4 * MIB, help="AWSWORLD_MAX_VALUE_BYTES for the run")
    parser.add_argument("--world", choices=("memory", "aws", "both"), default="both")
    parser.add_argument("--only", default=None, help="only the paths whose name contains this")
    args = parser.parse_args()
    os.environ[Settings.max_value_bytes.env] = str(args.bound)
    tracemalloc.start()
    if args.world in ("memory", "both"):
        asyncio.run(on_memory(args.bound, args.only))
    if args.world in ("aws", "both"):
        asyncio.run(on_aws(args.bound, args.only))


if __name__ == "__main__":
    main()
