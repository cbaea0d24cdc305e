"""How ``sam build`` builds the functions (``infra/Makefile`` running ``infra/build_function.py``), on a machine
whose only Python on PATH is 3.11.

SAM's own Python builder failed there ("Binary validation failed ... python3.13") and, where it worked, left no
bytecode in the artifact, so every cold start compiled every module. The ``sam`` tests build this repository's
template (from a copy of the checkout, with pip: no uv on PATH) and check the artifact: wheels for CPython 3.13 on
Linux, Python 3.13 bytecode for the code and its dependencies, and an import of the built flow handler with
``python3.13 -I -S`` (the artifact, the runtime's SDK, the standard library). The build without any Python 3.13
still succeeds, without bytecode, and says what to install. ``tests/deploy/test_init.py`` builds a user's app the
same way, with uv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from cfnlint.decode.cfn_yaml import load

from awsworld.deploy import build_function

from .dist import cold_start_bench, copy_source, path_without_python313, python313_env

ROOT = Path(__file__).resolve().parents[2]
SAM = ROOT / ".venv-tools" / "bin" / "sam"
FUNCTIONS = ("FlowFunction", "WebhookFunction", "WorldServerFunction")  # (sam build builds conditional ones too)
IMPORT_CHECK = """
import sys
sys.path.insert(0, ".")
sys.path.append(sys.argv[1])  # the runtime's boto3/botocore, after the function's code (as /var/runtime)
import flow, webhook, serve
assert flow.handler.__module__ == "awsworld.lambda_host.flow"
import mangum, starlette, httpx  # the serve extra: the World server, and pushed deliveries
import importlib.util
import awsworld.lambda_host.flow as module
with open(module.__spec__.cached, "rb") as pyc:  # the .pyc beside it: this Python's, unchecked-hash (flags 1)
    header = pyc.read(8)
assert header[:4] == importlib.util.MAGIC_NUMBER and int.from_bytes(header[4:], "little") == 1, header
print("built function imports")
"""






def base_env(path: str) -> dict[str, str]:
    keep = ("HOME", "LANG", "TMPDIR", "PYENV_ROOT", "XDG_CACHE_HOME", "UV_CACHE_DIR", "PIP_CACHE_DIR",
            "SSL_CERT_FILE", "SSL_CERT_DIR", "PIP_CERT", "REQUESTS_CA_BUNDLE")  # a machine's own CA settings
    return {name: os.environ[name] for name in keep if name in os.environ} | {
        "PATH": path, "SAM_CLI_TELEMETRY": "0", "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}


def pyc_count(folder: Path) -> int:
    return sum(1 for _ in folder.rglob("*.cpython-313.pyc"))


# ------------------------------------------------------------------------------------------ what holds them together


def test_every_function_builds_with_the_makefile_for_the_runtime_and_architecture_it_names() -> None:
    template = load(str(ROOT / "template.yaml"))
    functions = {name for name, r in template["Resources"].items() if r["Type"] == "AWS::Serverless::Function"}
    assert functions == set(FUNCTIONS)
    makefile = (ROOT / "infra" / "Makefile").read_text()
    for name in functions:
        assert template["Resources"][name]["Metadata"] == {"BuildMethod": "makefile", "ContextPath": "infra"}
        assert f"build-{name}" in makefile, f"infra/Makefile has no target for {name}"
    assert template["Globals"]["Function"]["Runtime"] == f"python{build_function.RUNTIME_VERSION}"
    (architecture,) = template["Globals"]["Function"]["Architectures"]
    assert f"ARCHITECTURE ?= {architecture}" in makefile


def test_without_any_python313_the_build_succeeds_without_bytecode_and_says_what_to_install(tmp_path: Path) -> None:
    """No uv, no python3.13, no pyenv: the artifact is built (it runs, its cold starts compile) and the build
    says why it has no bytecode and what to install; nothing is compiled for the wrong Python."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "flow.py").write_text("VALUE = 1\n")
    (code / "requirements.txt").write_text("cronsim==2.6\n")  # one small wheel from the package index
    artifacts = tmp_path / "artifacts"
    env = base_env(path_without_python313()) | {"PYENV_ROOT": str(tmp_path / "no-pyenv"), "ARTIFACTS_DIR":
                                                str(artifacts)}
    assert shutil.which("uv", path=env["PATH"]) is None
    done = subprocess.run(["make", "--makefile", str(ROOT / "infra" / "Makefile"), "build-FlowFunction"], cwd=code,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING: no Python 3.13 found" in done.stdout and "uv python install 3.13" in done.stdout
    assert "with pip for CPython 3.13 x86_64; no bytecode" in done.stdout
    assert (artifacts / "flow.py").read_text() == "VALUE = 1\n" and (artifacts / "cronsim").is_dir()
    assert not list(artifacts.rglob("*.pyc")), "no bytecode of another Python"


# ------------------------------------------------------------------------------------------ sam build


@pytest.mark.sam
@pytest.mark.timeout(600)  # about 20 s alone; more on a loaded machine
def test_the_repositorys_template_builds_with_only_python311_on_path_and_ships_bytecode(tmp_path: Path) -> None:
    if not SAM.exists():
        pytest.skip(f"the SAM tools venv is missing ({SAM.parent.parent}: .ci/run creates it)")
    cold_start = cold_start_bench()
    try:
        python313 = cold_start.find_python("3.13")
    except SystemExit:
        pytest.skip("no Python 3.13 on this machine to compile the bytecode and import the artifact with")
    # A copy of the checkout: handlers/requirements.txt installs "." (this source), and its in-tree build must
    # not meet another test's build of the checkout.
    project = copy_source(tmp_path / "repo", "template.yaml", "samconfig.toml", "infra", "handlers")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "sam").symlink_to(SAM)
    env = base_env(path_without_python313(tools)) | python313_env(python313)
    assert shutil.which("uv", path=env["PATH"]) is None, "this build takes pip's route"
    started = time.monotonic()
    done = subprocess.run(["sam", "build"], cwd=project, env=env, capture_output=True, text=True, timeout=500,
                          check=False)
    seconds = time.monotonic() - started
    assert done.returncode == 0, f"sam build failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    print(f"sam build of the repository's template: {seconds:.1f} s")
    assert "Binary validation failed" not in done.stdout + done.stderr
    log = done.stdout + done.stderr  # make's output comes through SAM's log (stderr)
    assert log.count("with pip for CPython 3.13 x86_64;") == len(FUNCTIONS), log[-3000:]
    runtime_sdk = cold_start.runtime_sdk(python313, tmp_path / "runtime-sdk")
    for function in FUNCTIONS:
        built = project / ".aws-sam" / "build" / function
        assert any(built.glob("pydantic_core/_pydantic_core.cpython-313-x86_64-linux-gnu.so")), \
            "pydantic_core's wheel is the runtime's (CPython 3.13, Linux x86_64), not this machine's 3.11"
        assert not (built / "bin").exists(), "no console scripts naming the build machine's interpreter"
        assert not {"boto3", "botocore"} & {entry.name for entry in built.iterdir()}, "the runtime has the SDK"
        assert pyc_count(built / "awsworld") >= 100 and pyc_count(built / "pydantic") >= 50
        assert (built / "__pycache__" / "flow.cpython-313.pyc").is_file(), "the entry point is compiled too"
        output = subprocess.run([python313, "-I", "-S", "-B", "-c", IMPORT_CHECK, str(runtime_sdk)], cwd=built,
                                capture_output=True, text=True, timeout=120, check=False)
        assert output.returncode == 0 and "built function imports" in output.stdout, output.stderr[-3000:]
