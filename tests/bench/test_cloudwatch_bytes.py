"""``bench/cloudwatch_bytes.py``'s meter on a tiny workload, through the real instrumented flow handler on moto: it
sees every invocation's log lines and its one EMF blob, the metrics by name and dimensions, and bills what it saw."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from aws_lambda_powertools.metrics.provider.cold_start import reset_cold_start_flag

from awsworld.aws import AWSWorld
from awsworld.client.client import Client
from awsworld.lambda_host import flow
from awsworld.lambda_host.container import Container
from awsworld.lambda_host.observability import instrument
from awsworld.local import LocalAWS, MotoServer


def _load() -> ModuleType:
    """bench/ is scripts, not a package: load cloudwatch_bytes.py by path (once per process: it declares
    workflows)."""
    name = "awsworld_bench_cloudwatch_bytes"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "bench" / "cloudwatch_bytes.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


bench = _load()


async def test_the_meter_counts_each_invocations_lines_and_blob_and_bills_them(moto_server: MotoServer) -> None:
    async with LocalAWS("moto", moto=moto_server, run_workflows=False) as local:
        world = local.world
        container = Container(world_factory=lambda: AWSWorld(world.config))
        handler = instrument(lambda event, context: flow.handle(event, context, container))
        client = Client(world, check_published=False)
        # This process's cold start may have been spent by an earlier test in the same worker (CI 102: 2 blobs
        # for 2 invocations); Powertools keeps it in a module flag.
        reset_cold_start_flag()
        try:
            meter = await bench._measure(world, handler, lambda: bench._start(client, bench.fan_out, [(3,)]))
        finally:
            await asyncio.to_thread(container.reset)
            container.loop.close()
    assert meter.invocations >= 2, "the start, then the queued steps"
    assert meter.emf_events == meter.invocations + 1, "one EMF blob an invocation, and the cold start's own"
    assert ("ColdStart", "function_name,service") in meter.metrics
    assert meter.log_events >= 2 * meter.invocations, "a delivery's line and the batch's line at least"
    assert {("FlowDeliveries", "service"), ("StepDeliveries", "service"), ("RunsCompleted", "service")} <= meter.metrics
    lines = meter.log_events + meter.emf_events + len(bench.LAMBDA_LINES) * meter.invocations
    assert meter.billed_bytes() == (meter.log_bytes + meter.emf_bytes + bench.LAMBDA_LINE_BYTES * meter.invocations
                                    + bench.EVENT_OVERHEAD_BYTES * lines)
    assert meter.log_bytes / meter.log_events > 300, "a JSON line with the Lambda context and the run's ids"
