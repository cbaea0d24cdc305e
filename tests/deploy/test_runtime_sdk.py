"""The version skew between the botocore awsworld is tested with and the one Lambda's runtime preinstalls: a
fresh process whose botocore is the oldest awsworld supports (``MIN_BOTOCORE``, fetched from the package
index) runs a delivery through the real flow handler on the emulator, and a botocore older than that is
refused at the first client with what to do."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from awsworld.aws.sdk import MIN_BOTOCORE, BotocoreTooOldError, check_botocore

from .dist import cold_start_bench

ROOT = Path(__file__).resolve().parents[2]




@pytest.mark.timeout(600)
async def test_a_delivery_runs_on_the_oldest_supported_botocore(tmp_path: Path) -> None:
    bench = cold_start_bench()
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
