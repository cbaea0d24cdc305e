"""``awsworld dlq`` and ``awsworld dlq redrive``, as an operator whose DLQ alarm fired runs them: commands as
processes against an ``awsworld dev`` process, its exports in their environment. Messages reach the DLQ the way
docs/concepts/guarantees.md says: a flow and a step message naming a run that does not exist, and a body that is not
awsworld's, each moved there on its first receive. The listing says what each is for and why it is there, never
its payload; a redrive before the cause is fixed sends it round again (the consumer dead-letters it anew), and
after the fix (the run exists) the run's messages are delivered and stay out."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from awsworld.world.ids import new_run_id

from .test_cli import Dev, _clean_env, project_of, serving

DLQCLI = '''
from awsworld import step, workflow


@step(name="dlqcli.add")
async def add(a: int, b: int) -> int:
    return a + b


@workflow(name="dlqcli.sum")
async def total(a: int, b: int) -> int:
    return await add(a, b)
'''

SECRET = "s3cr3t-payload-content"

SEND = f'''
import asyncio, sys
from awsworld.aws import AWSWorld
from awsworld.world.messages import FlowMessage, queue_name_for

async def main() -> None:
    async with AWSWorld() as world:
        queue = queue_name_for("dlqcli.sum")
        flow = await world.queue(queue, FlowMessage(sys.argv[1], "dlqcli.sum").to_payload())
        step = await world.queue(queue, FlowMessage(sys.argv[1], "dlqcli.sum", "step_1", "dlqcli.gone",
                                                    {{"token": "{SECRET}"}}).to_payload())
        sqs = await world.clients.sqs()
        await sqs.send_message(QueueUrl=world.config.queue_url, MessageBody="not json {SECRET}")
        print(flow, step)

asyncio.run(main())
'''

QUEUE_DEPTH = '''
import boto3, os
attributes = boto3.client("sqs").get_queue_attributes(QueueUrl=os.environ["AWSWORLD_QUEUE_URL"], AttributeNames=[
    "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"])
print(sum(int(value) for value in attributes["Attributes"].values()))
'''


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    yield from serving(project_of(tmp_path_factory, "dlq", DLQCLI), tmp_path_factory, "dlq")


def python(dev: Dev, code: str, *args: str) -> str:
    """A Python script in the shell of dev's exports (the World's own calls, boto3)."""
    done = subprocess.run([sys.executable, "-c", code, *args], env=dev.env, cwd=dev.cwd, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def dlq_until(dev: Dev, ready: Callable[[list[dict[str, Any]]], bool], timeout: float = 30) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        letters: list[dict[str, Any]] = dev.json("dlq")
        if ready(letters):
            return letters
        assert time.monotonic() < deadline, letters
        time.sleep(0.2)


def test_a_dead_letter_says_why_without_its_payload_and_is_redriven_once_its_cause_is_fixed(dev: Dev) -> None:
    empty = dev("dlq")
    assert (empty.code, empty.out, empty.err) == (0, "", "the dead-letter queue is empty\n")
    assert dev.json("dlq") == []

    run_id = new_run_id()
    flow_id, step_id = python(dev, SEND, run_id).split()
    letters = dlq_until(dev, lambda found: len(found) == 3)
    assert {letter["messageId"] for letter in letters} == {flow_id, step_id, None}
    assert set(letters[0]) == {"messageId", "sqsMessageId", "sourceSqsMessageId", "firstSent", "receives", "kind",
                               "runId", "stepId", "workflow", "reason"}
    by_id = {letter["messageId"]: letter for letter in letters}
    assert {k: by_id[flow_id][k] for k in ("kind", "runId", "stepId", "workflow", "receives")} == {
        "kind": "flow", "runId": run_id, "stepId": None, "workflow": "dlqcli.sum", "receives": 1}
    assert by_id[flow_id]["reason"].startswith(f"run {run_id} does not exist")
    assert {k: by_id[step_id][k] for k in ("kind", "runId", "stepId", "reason")} == {
        "kind": "step", "runId": run_id, "stepId": "step_1", "reason": f"run {run_id} does not exist"}
    assert {k: by_id[None][k] for k in ("kind", "runId", "reason")} == {
        "kind": "other", "runId": None, "reason": "body is not JSON"}

    listing = dev("dlq")
    assert listing.code == 0, listing
    lines = listing.out.splitlines()
    assert lines[0].split() == ["MESSAGE", "FIRST", "SENT", "(UTC)", "RECEIVES", "RUN", "KIND", "REASON"]
    flow_line = next(line for line in lines if line.startswith(flow_id))
    assert f" {run_id}  flow " in flow_line and flow_line.endswith(by_id[flow_id]["reason"]), flow_line
    assert f" {run_id}  step step_1  run {run_id} does not exist" in listing.out
    assert lines[-1].startswith("3 message(s); `awsworld dlq redrive`")
    assert SECRET not in listing.out + json.dumps(letters), "no payload in what an operator sees"

    # A list cut at --max says how many it left out, and how to see them; --json keeps stdout the list.
    cut = dev("dlq", "--max", "2")
    assert cut.code == 0 and len(cut.out.splitlines()) == 4, cut
    assert cut.out.splitlines()[-1].startswith(
        "2 listed of about 3 in the dead-letter queue (`--max 3` lists more); `awsworld dlq redrive`"), cut
    cut_json = dev("dlq", "list", "--max", "1", "--json")
    assert len(json.loads(cut_json.out)) == 1, cut_json
    assert cut_json.err == "1 listed of about 3 in the dead-letter queue (`--max 3` lists more)\n", cut_json

    # Redriven before the cause is fixed: the flow queue gets it, and the consumer moves it back, saying why again.
    once = dev("dlq", "redrive", "--max", "1")
    assert (once.code, once.out) == (0, "moved 1 message(s) to the flow queue\n"), once
    before = {letter["sqsMessageId"] for letter in letters}
    back = dlq_until(dev, lambda found: len(found) == 3 and {x["sqsMessageId"] for x in found} != before)
    assert {letter["messageId"] for letter in back} == {flow_id, step_id, None}

    # The cause fixed (the run now exists), a redrive delivers the run's two messages, which do not come back.
    assert dev("start", "dlqcli.sum", "[1, 2]", "--run-id", run_id, "--wait", "30").out.splitlines() == [run_id, "3"]
    moved = dev("dlq", "redrive", "--json")
    assert (moved.code, json.loads(moved.out)) == (0, {"moved": 3, "failed": []}), moved
    again = {letter["sqsMessageId"] for letter in back}
    [left] = dlq_until(dev, lambda found: len(found) == 1 and found[0]["sqsMessageId"] not in again)
    assert left["kind"] == "other", "the body that is not awsworld's came back: nothing can deliver it"
    deadline = time.monotonic() + 30
    while python(dev, QUEUE_DEPTH) != "0\n":  # the run's messages were received, and acknowledged
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert [letter["messageId"] for letter in dev.json("dlq")] == [None]


def test_without_the_queues_it_needs_it_says_which_setting(dev: Dev) -> None:
    runner = dev.runners[0]
    no_dlq = {k: v for k, v in dev.env.items() if k != "AWSWORLD_DLQ_URL"}
    listed = runner(("dlq",), no_dlq, dev.cwd)
    assert listed.one_line_error(2) == (
        "awsworld dlq: AWSWORLD_DLQ_URL is not set: the CLI does not know which queue is the dead-letter queue "
        "(hint: set it from your stack's ClientEnvironment output (`awsworld dev` exports it))")
    no_queue = {k: v for k, v in dev.env.items() if k != "AWSWORLD_QUEUE_URL"}
    redriven = runner(("dlq", "redrive"), no_queue, dev.cwd)
    assert "AWSWORLD_QUEUE_URL is not set" in redriven.one_line_error(2)
    zero = runner(("dlq", "redrive", "--max", "0"), _clean_env(), dev.cwd)
    assert zero.code == 2 and "argument --max: must be a whole number of 1 or more, got '0'" in zero.err, zero
