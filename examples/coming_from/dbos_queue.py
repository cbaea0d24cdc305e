"""DBOS's queue tutorial (a workflow enqueues one workflow per task on a queue, then gathers their results), ported
(docs: Coming from DBOS). The queue's concurrency is the task workflow's ``Concurrency``, across every run of the
deployment, as a DBOS queue's is across its processes; each enqueued task is a child run."""

import asyncio

from awsworld import Concurrency, RateLimit, child_options, start_child, step, workflow


# --8<-- [start:queue]
# DBOS: queue = Queue("example_queue", concurrency=2, limiter={"limit": 50, "period": 30})
@step(name="dbos.call_api", rate=RateLimit("50/30s"))  # the limiter: starts of the calls, across runs
async def call_api(task: str) -> str:
    return task.upper()


@workflow(name="dbos.process_task", concurrency=Concurrency(2))  # at most 2 tasks running; the rest wait
async def process_task(task: str) -> str:
    return await call_api(task)


@workflow(name="dbos.process_tasks")
async def process_tasks(tasks: list[str], background: list[str] | None = None) -> list[str]:
    handles = [await start_child(process_task, task) for task in tasks]  # queue.enqueue(process_task, task)
    for task in background or []:  # with SetEnqueueOptions(priority=10): queue.enqueue(process_task, task)
        handles.append(await child_options(priority=-10).start(process_task, task))  # DBOS runs the lowest first
    return list(await asyncio.gather(*handles))  # [handle.get_result() for handle in handles]
# --8<-- [end:queue]


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        run = await env.client.start(process_tasks, ["a", "b", "c", "d", "e"], ["z"])
        assert await run.result() == ["A", "B", "C", "D", "E", "Z"]
        assert len(await run.children()) == 6


if __name__ == "__main__":
    asyncio.run(main())
