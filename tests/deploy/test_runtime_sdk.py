"""The version skew between the botocore awsworld is tested with and the one Lambda's runtime preinstalls: a
fresh process whose botocore is the oldest awsworld supports (``MIN_BOTOCORE``, fetched from the package
index) runs a delivery through the real flow handler on the emulator, and a botocore older than that is
refused at the first client with what to do."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from awsworld.aws.sdk import MIN_BOTOCORE, BotocoreTooOldError, check_botocore

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("awsworld_bench_cold_start_sdk", ROOT / "bench" / "cold_start.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(600)
async def test_a_delivery_runs_on_the_oldest_supported_botocore(tmp_path: Path) -> None:
    bench = _bench()
    floor = ".".join(map(str, MIN_BOTOCORE))
    sdk = await asyncio.to_thread(bench.runtime_sdk, sys.executable, tmp_path / "sdk", floor)
    # The child runs this environment's interpreter with the old SDK ahead of site-packages (which hold the
    # newer one): the handler imports awsworld as installed here, and botocore from ``sdk``.
    probe = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(sdk)!r}); import botocore; "
                                   "print(botocore.__version__)"]
    found = await asyncio.to_thread(subprocess.run, probe, capture_output=True, text=True, check=True)
    assert found.stdout.strip() == floor
    steps = await bench.first_steps(sys.executable, [ROOT / "handlers", sdk], [], 1, tmp_path, "floor", flags=("-B",))
    assert len(steps) == 1 and steps[0]["step"] < steps[0]["done"], "the step ran and the run completed"


def test_an_older_botocore_is_refused_with_what_to_do() -> None:
    with pytest.raises(BotocoreTooOldError, match=r"botocore >= 1\.34\.0, found 1\.33\.13: add boto3>=1\.34\.0"):
        check_botocore("1.33.13")
    check_botocore(".".join(map(str, MIN_BOTOCORE)))
    check_botocore("1.40.61")
    check_botocore("2.0.0.dev1")
