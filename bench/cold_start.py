"""A flow function's cold start, measured on ``sam build``'s own artifact as Lambda would run it.

Prints, for ``.aws-sam/build/FlowFunction`` (built here unless ``--artifact`` names a built one):

- the artifact's size (unzipped, as Lambda's 250 MB limit counts it) and its largest distributions;
- the import of the flow handler (``import flow``) in fresh ``python3.13 -S -B`` processes: only the artifact,
  the runtime's SDK and the standard library on the path, nothing written beside the code (Lambda's
  ``/var/task`` is read-only, so a module without a ``.pyc`` in the artifact is compiled by every cold start).
  Median and minimum of wall and CPU time, and RSS after the import; as built (``sam build`` compiles the
  bytecode: ``infra/build_function.py``), and from a copy without its ``.pyc`` files (what an artifact without
  bytecode costs: every cold start compiles);
- the first step of a run from a fresh process: a run is started on the emulator (moto's server on 127.0.0.1),
  its first delivery is received as the SQS event source mapping would, and a fresh process imports the flow
  handler and calls ``flow.handler`` with it. Times from spawning the process to the end of the import, to the
  moment the step's body runs, and to the handler's return (the run completed), median of ``--runs``.

Lambda's Python runtime preinstalls boto3 and botocore (``/var/runtime``, after ``/var/task`` on the path);
the artifact carries none, so the bench installs the SDK this environment has into a folder of its own
(``--sdk``), compiled as the runtime's is, and puts it after the artifact.

CPU time is reported beside wall time because the machine may be shared: on an idle core the two agree, and
CPU time moves far less with load. ``uptime``'s load is printed with the figures.

Run: ``python bench/cold_start.py`` (builds; about a minute), or ``python bench/cold_start.py --artifact
.aws-sam/build``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FUNCTION = "FlowFunction"
APP_MODULE = "cold_start_app"
APP = '''"""The bench's workflow: one step, which notes when its body runs."""
import os
import time

from awsworld import step, workflow


@step(name="cold.first")
async def first(x: int) -> int:
    path = os.environ.get("COLD_START_STEP_FILE")
    if path:
        with open(path, "a") as out:
            out.write(f"{time.time()}\\n")
    return x + 1


@workflow(name="cold.one_step")
async def one_step(x: int) -> int:
    return await first(x)
'''

# RSS is /proc/self/status's VmRSS: getrusage's ru_maxrss keeps the parent's peak across fork and exec.
RSS = "int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS:')).split()[1])"
IMPORT_CHILD = '''
import sys, time
start, cpu = time.perf_counter(), time.process_time()
sys.path[:0] = {front!r}
sys.path += {back!r}
import flow
print(time.perf_counter() - start, time.process_time() - cpu, ''' + RSS + ''')
'''

HANDLER_CHILD = '''
import sys, time, json
sys.path[:0] = {front!r}
sys.path += {back!r}
import flow
imported, rss = time.time(), ''' + RSS + '''

class Context:
    function_name, function_version, memory_limit_in_mb = "cold-start", "1", 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:cold-start"
    aws_request_id, log_group_name, log_stream_name = "cold-start", "/aws/lambda/cold-start", "cold"
    _deadline = time.monotonic() + 120
    def get_remaining_time_in_millis(self):
        return int((self._deadline - time.monotonic()) * 1000)

with open({event!r}) as source:
    response = flow.handler(json.load(source), Context())
done = time.time()
sys.stdout.flush()
print("COLD_START", json.dumps({{"imported": imported, "done": done, "rss_kb": rss, "response": response,
                                 "rss_after_kb": ''' + RSS + '''}}))
'''


def find_python(version: str) -> str:
    """``python<version>`` on PATH, else pyenv's (``$(pyenv root)/versions/<version>.*``)."""
    found = shutil.which(f"python{version}")
    if found and subprocess.run([found, "-c", ""], capture_output=True).returncode == 0:
        return found
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    for candidate in sorted(pyenv_root.glob(f"versions/{version}.*/bin/python{version}"), reverse=True):
        return str(candidate)
    raise SystemExit(f"python{version} not found on PATH or in pyenv ({pyenv_root}): the functions' runtime")


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AWSWORLD_", "AWS_"))}


def build(python: str, build_dir: Path) -> Path:
    sam = ROOT / ".venv-tools" / "bin" / "sam"
    if not sam.exists():
        raise SystemExit(f"{sam} not found: bash .ci/run creates the SAM tools venv (or pass --artifact)")
    env = clean_env() | {"SAM_CLI_TELEMETRY": "0", "PYTHON313": python}  # the build compiles with it
    print(f"sam build --build-dir {build_dir} (python: {python}) ...", flush=True)
    subprocess.run([str(sam), "build", "--build-dir", str(build_dir)], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return build_dir


SDK_DISTRIBUTIONS = ("boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "urllib3", "six")


def runtime_sdk(python: str, target: Path, version: str | None = None) -> Path:
    """A folder holding what Lambda's runtime preinstalls (boto3, botocore and their dependencies), compiled for
    ``python`` as the runtime's are: this environment's own copies, or with ``version`` that boto3 and
    botocore release fetched with pip (the oldest botocore awsworld supports, say). Kept in ``target``."""
    folder = target / (f"boto3-{version}" if version else f"boto3-{metadata.version('boto3')}")
    if (folder / "botocore").is_dir():
        return folder
    staging = target / f"{folder.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    if version:
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(staging),
                        f"boto3=={version}", f"botocore=={version}"], check=True, env=clean_env())
    else:
        for name in SDK_DISTRIBUTIONS:
            dist = metadata.distribution(name)
            for top in sorted({str(f).split("/")[0] for f in dist.files or () if not str(f).startswith("..")}):
                source = Path(str(dist.locate_file(top)))
                if source.is_dir():
                    shutil.copytree(source, staging / top, ignore=shutil.ignore_patterns("__pycache__"))
                elif source.is_file():
                    shutil.copy2(source, staging / top)
    subprocess.run([python, "-m", "compileall", "-q", str(staging)], check=True, stdout=subprocess.DEVNULL)
    staging.rename(folder)
    return folder


def without_bytecode(artifact: Path, target: Path) -> Path:
    """A copy of the artifact without its ``.pyc`` files: what a cold start costs when it compiles every module."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(artifact, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


def size_report(artifact: Path) -> tuple[float, list[tuple[str, float]]]:
    def size(path: Path) -> int:
        return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())

    parts = sorted(((entry.name, size(entry) / 2**20) for entry in artifact.iterdir()), key=lambda p: -p[1])
    return sum(mb for _, mb in parts), parts


def median_min(values: list[float]) -> str:
    return f"{statistics.median(values):6.3f} (min {min(values):.3f})"


def time_imports(python: str, artifact: Path, sdk: Path, runs: int) -> dict[str, list[float]]:
    code = IMPORT_CHILD.format(front=[str(artifact)], back=[str(sdk)])
    walls, cpus, rss = [], [], []
    for _ in range(runs):
        out = subprocess.run([python, "-S", "-B", "-c", code], cwd=artifact, env=clean_env(), capture_output=True,
                             text=True)
        if out.returncode:
            raise SystemExit(f"import flow failed in {artifact}:\n{out.stderr[-3000:]}")
        wall, cpu, kb = out.stdout.split()
        walls.append(float(wall))
        cpus.append(float(cpu))
        rss.append(int(kb) / 1024)
    return {"wall": walls, "cpu": cpus, "rss": rss}


async def first_steps(python: str, front: list[Path], back: list[Path], runs: int, scratch: Path, label: str,
                      flags: tuple[str, ...] = ("-S", "-B")) -> list[dict[str, float]]:
    """``runs`` times: start a run, receive its first delivery, and hand it to ``flow.handler`` in a fresh
    ``python`` whose path is ``front`` + (the interpreter's own, unless ``-S``) + ``back``; seconds from
    spawning it to the import's end, to the step's body, and to the handler's return."""
    sys.path.insert(0, str(scratch))
    (scratch / f"{APP_MODULE}.py").write_text(APP)
    app = __import__(APP_MODULE)

    from awsworld.local import LocalAWS

    results: list[dict[str, float]] = []
    async with LocalAWS("moto", run_workflows=False) as local:
        config = local.config
        assert local.client is not None and config.queue_url and config.endpoint_url
        env = clean_env() | {
            "AWSWORLD_TABLE": config.table_name, "AWSWORLD_BUCKET": config.bucket_name,
            "AWSWORLD_QUEUE_URL": config.queue_url, "AWSWORLD_DLQ_URL": config.dlq_url or "",
            "AWSWORLD_MODULES": APP_MODULE, "AWSWORLD_DEPLOYMENT_ID": await local.world.get_deployment_id(),
            "AWS_ENDPOINT_URL": config.endpoint_url,
            "AWS_ENDPOINT_URL_DYNAMODB": config.dynamodb_endpoint_url or config.endpoint_url,
            "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "awsworldlocal", "AWS_SECRET_ACCESS_KEY": "local",
            "POWERTOOLS_SERVICE_NAME": "cold-start", "POWERTOOLS_METRICS_NAMESPACE": "awsworld",
            "AWS_LAMBDA_FUNCTION_NAME": "cold-start",
        }
        sqs = await local.world.clients.sqs()
        for i in range(runs):
            run = await local.client.start(app.one_step, i)
            got = await sqs.receive_message(QueueUrl=config.queue_url, MaxNumberOfMessages=1, WaitTimeSeconds=5,
                                            AttributeNames=["All"], MessageAttributeNames=["All"])
            (message,) = got["Messages"]
            event_file, step_file = scratch / f"event-{label}-{i}.json", scratch / f"step-{label}-{i}.txt"
            event_file.write_text(json.dumps({"Records": [_record(message, config.queue_url)]}))
            code = HANDLER_CHILD.format(front=[*map(str, front), str(scratch)], back=[*map(str, back)],
                                        event=str(event_file))
            spawned = time.time()
            child = await asyncio.create_subprocess_exec(
                python, *flags, "-c", code, cwd=front[0], env=env | {"COLD_START_STEP_FILE": str(step_file)},
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            stdout, stderr = await child.communicate()
            line = next((ln for ln in stdout.decode().splitlines() if ln.startswith("COLD_START ")), None)
            if child.returncode or line is None:
                raise SystemExit(f"the flow handler failed:\n{stderr.decode()[-3000:]}")
            report = json.loads(line.split(" ", 1)[1])
            assert report["response"] == {"batchItemFailures": []}, report["response"]
            assert await run.result(timeout=30) == i + 1, "the run completed with its step's result"
            await sqs.delete_message(QueueUrl=config.queue_url, ReceiptHandle=message["ReceiptHandle"])
            step_ran = float(step_file.read_text().split()[0])
            results.append({"import": report["imported"] - spawned, "step": step_ran - spawned,
                            "done": report["done"] - spawned, "rss": report["rss_kb"] / 1024,
                            "rss_after": report["rss_after_kb"] / 1024})
    return results


def _record(message: dict[str, Any], queue_url: str) -> dict[str, Any]:
    """A ReceiveMessage message as the SQS event source mapping hands it to Lambda."""
    attributes = message.get("Attributes", {})
    return {
        "messageId": message["MessageId"], "receiptHandle": message["ReceiptHandle"], "body": message["Body"],
        "attributes": {"ApproximateReceiveCount": attributes["ApproximateReceiveCount"],
                       "SentTimestamp": attributes["SentTimestamp"], "SenderId": "AIDAIENQZJOLO23YVJ4VO",
                       "ApproximateFirstReceiveTimestamp": attributes.get("ApproximateFirstReceiveTimestamp",
                                                                          attributes["SentTimestamp"])},
        "messageAttributes": {
            name: {"stringValue": value.get("StringValue"), "binaryValue": None, "stringListValues": [],
                   "binaryListValues": [], "dataType": value["DataType"]}
            for name, value in message.get("MessageAttributes", {}).items()},
        "md5OfBody": message["MD5OfBody"], "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{queue_url.rsplit('/', 1)[-1]}",
        "awsRegion": "us-east-1",
    }


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", type=Path, help="a sam build directory (holding FlowFunction/); default: build")
    parser.add_argument("--python", default=None, help="the runtime's interpreter (default: python3.13, or pyenv's)")
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per measurement (default 7)")
    parser.add_argument("--sdk", type=Path, default=ROOT / ".aws-sam" / "runtime-sdk",
                        help="where the runtime's boto3/botocore is laid out for the bench")
    parser.add_argument("--sdk-version", help="a boto3 release for the runtime's SDK (default: this environment's)")
    parser.add_argument("--make-sdk", action="store_true", help="only lay out the runtime's SDK; print its folder")
    args = parser.parse_args(argv)
    python = args.python or find_python("3.13")
    if args.make_sdk:
        print(runtime_sdk(python, args.sdk, args.sdk_version))
        return
    with tempfile.TemporaryDirectory(prefix="awsworld-cold-") as temp:
        scratch = Path(temp)
        build_dir = args.artifact or build(python, scratch / "build")
        artifact = build_dir / FUNCTION
        sdk = runtime_sdk(python, args.sdk, args.sdk_version)
        total, parts = size_report(artifact)
        print(f"\nload average before: {load()}   python: {python}   runtime SDK: {sdk.name}")
        print(f"\nartifact {artifact}: {total:.1f} MB unzipped; largest: "
              + ", ".join(f"{name} {mb:.1f}" for name, mb in parts[:6]))
        bare = without_bytecode(artifact, scratch / "bare")
        variants = (("without bytecode", bare), ("as built (bytecode)", artifact))
        print(f"\nimport flow, {args.runs} fresh processes (python -S -B), seconds: median (min)")
        for label, folder in variants:
            got = time_imports(python, folder, sdk, args.runs)
            print(f"  {label:20s} wall {median_min(got['wall'])}   cpu {median_min(got['cpu'])}   "
                  f"RSS {statistics.median(got['rss']):.1f} MB")
        for n, (label, folder) in enumerate(variants):
            steps = asyncio.run(first_steps(python, [folder], [sdk], args.runs, scratch, str(n)))
            print(f"\nfirst step from a fresh process ({label}), {args.runs} runs on moto, seconds from spawn:")
            for key, name in (("import", "handler imported"), ("step", "first step's body runs"),
                              ("done", "delivery done (run completed)")):
                print(f"  {name:30s} {median_min([s[key] for s in steps])}")
            print(f"  RSS after import {statistics.median([s['rss'] for s in steps]):.1f} MB, after the delivery "
                  f"{statistics.median([s['rss_after'] for s in steps]):.1f} MB")
        print(f"\nload average after: {load()}")


if __name__ == "__main__":
    main()
