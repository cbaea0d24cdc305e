"""``awsworld init`` and ``awsworld template``, run as processes the way a user runs them.

The quick tests hold the file-level promises: the repository's template.yaml, infra/monitoring.yaml and
handlers/ are the packaged ones (one source of truth), existing files are never overwritten without --force,
and the generated samconfig names real parameters. The ``sam`` test turns a fresh project with one workflow
module into a SAM app, lints and builds it with the real SAM tools, and imports the built function with nothing
but its own code and the standard library, as Lambda would. Deselect it with ``-m "not sam"``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from cfnlint.decode.cfn_yaml import load

from awsworld import __version__
from awsworld.deploy import HANDLERS, handler_text, monitoring_text, template_text

from .dist import build

ROOT = Path(__file__).resolve().parents[2]
AWSWORLD = str(Path(sys.executable).with_name("awsworld"))
SAM_TOOLS = ROOT / ".venv-tools" / "bin"
WRITTEN = {"template.yaml", "infra/monitoring.yaml", "samconfig.toml", "requirements.txt", "flow.py", "webhook.py"}

ORDERS = '''\
"""A user's workflow module, as a new project would write it."""

from awsworld import step, workflow


@step
async def reserve(order: str) -> str:
    return f"reserved {order}"


@workflow(name="orders.place")
async def place(order: str) -> str:
    return await reserve(order)
'''


def awsworld(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AWSWORLD, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def make_project(path: Path) -> Path:
    (path / "myapp").mkdir(parents=True)
    (path / "myapp" / "__init__.py").write_text("")
    (path / "myapp" / "orders.py").write_text(ORDERS)
    return path


# ------------------------------------------------------------------------------------------ one source of truth


def test_the_repositorys_sam_files_are_the_packaged_ones() -> None:
    """Edit src/awsworld/deploy/, then regenerate: the failure message says how."""
    regenerate = "edit src/awsworld/deploy/template.yaml, then: awsworld template --code-uri handlers/ > template.yaml"
    assert (ROOT / "template.yaml").read_text() == template_text("handlers/"), regenerate
    assert (ROOT / "infra" / "monitoring.yaml").read_text() == monitoring_text(), \
        "edit src/awsworld/deploy/monitoring.yaml, then: awsworld template --monitoring > infra/monitoring.yaml"
    for route in HANDLERS:
        assert (ROOT / "handlers" / f"{route}.py").read_text() == handler_text(route), route
    assert template_text("handlers/").count("CodeUri: handlers/") == 1
    assert template_text() == template_text("."), "the packaged template builds from the user's project root"


def test_awsworld_template_prints_the_packaged_files(tmp_path: Path) -> None:
    done = awsworld("template", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == template_text()
    monitoring = awsworld("template", "--monitoring", cwd=tmp_path)
    assert monitoring.returncode == 0 and monitoring.stdout == monitoring_text()


# ------------------------------------------------------------------------------------------ init


def test_init_writes_the_app_wired_to_the_users_modules(tmp_path: Path) -> None:
    project = make_project(tmp_path / "my_shop")
    done = awsworld("init", "--module", "myapp.orders", "-m", "myapp.other", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "sam build && sam deploy --guided" in done.stdout
    assert "myapp.other is not myapp/other.py" in done.stderr, "a module outside the project is pointed out"
    assert {str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()} - {
        "myapp/__init__.py", "myapp/orders.py"} == WRITTEN
    assert (project / "template.yaml").read_text() == template_text()
    assert (project / "infra" / "monitoring.yaml").read_text() == monitoring_text()
    assert f"\nawsworld=={__version__}\n" in (project / "requirements.txt").read_text()
    config = tomllib.loads((project / "samconfig.toml").read_text())
    assert config["default"]["global"]["parameters"]["stack_name"] == "my-shop-dev"
    assert config["prod"]["global"]["parameters"]["stack_name"] == "my-shop-prod"
    template = load(str(project / "template.yaml"))
    for env in ("default", "prod"):
        overrides = dict(re.findall(r'(\w+)="([^"]*)"', config[env]["deploy"]["parameters"]["parameter_overrides"]))
        assert overrides["Modules"] == "myapp.orders,myapp.other"
        assert overrides["Stage"] == ("dev" if env == "default" else "prod")
        for name, value in overrides.items():  # every override is a parameter, with a value it accepts
            spec = template["Parameters"][name]
            assert value in [str(v) for v in spec.get("AllowedValues", [value])], (env, name)
            assert re.fullmatch(spec.get("AllowedPattern", ".*"), value), (env, name)
            if spec["Type"] == "Number":
                assert spec.get("MinValue", float("-inf")) <= float(value) <= spec.get("MaxValue", float("inf"))
    for route in HANDLERS:
        assert (project / f"{route}.py").read_text() == handler_text(route)


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    project = make_project(tmp_path / "shop")
    (project / "requirements.txt").write_text("requests\n")
    refused = awsworld("init", str(project), "-m", "myapp.orders", cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.strip().count("\n") == 0, "one line"
    assert "requirements.txt already exists" in refused.stderr and "--force" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (project / "requirements.txt").read_text() == "requests\n"
    assert not (project / "template.yaml").exists(), "nothing is written when anything would be overwritten"
    forced = awsworld("init", str(project), "-m", "myapp.orders", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert f"awsworld=={__version__}" in (project / "requirements.txt").read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["-m", "my-app.orders"], "is not a module name"),
    (["-m", "flow"], "shadowed by the entry point flow.py"),
    (["missing-dir", "-m", "myapp.orders"], "is not a directory"),
])
def test_init_rejects_mistakes_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    done = awsworld("init", *args, cwd=tmp_path)
    assert done.returncode == 1 and message in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not list(tmp_path.iterdir()), "nothing written"


# ------------------------------------------------------------------------------------------ the SAM tools


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


BUILT_FUNCTION_CHECK = """
import sys
sys.path.insert(0, ".")
import flow, webhook
from awsworld.lambda_.container import import_modules
from awsworld.runtime.registry import REGISTRY
import_modules(sys.argv[1])
assert "orders.place" in REGISTRY.workflows, sorted(REGISTRY.workflows)
assert REGISTRY.workflows["orders.place"].fn.__module__ == "myapp.orders"
assert "myapp.orders.reserve" in REGISTRY.steps, sorted(REGISTRY.steps)
assert flow.handler.__module__ == "awsworld.lambda_.flow" and webhook.handler.__module__ == "awsworld.lambda_.webhook"
print("built function imports", sys.argv[1])
"""


@pytest.mark.sam
@pytest.mark.timeout(600)  # about a minute alone; several on a loaded machine
def test_an_initialised_project_lints_builds_and_imports_its_workflows(tmp_path: Path) -> None:
    if not (SAM_TOOLS / "sam").exists():
        pytest.skip(f"the SAM tools venv is missing ({SAM_TOOLS.parent}: .ci/run creates it)")
    python311 = shutil.which("python3.11")
    if python311 is None:
        pytest.skip("sam build needs python3.11 on PATH (the functions' runtime)")
    project = make_project(tmp_path / "shop")
    done = awsworld("init", str(project), "--module", "myapp.orders", cwd=tmp_path)
    assert done.returncode == 0, done.stderr

    # awsworld==<version> from requirements.txt: this checkout's wheel, as the package index would serve it.
    wheels = tmp_path / "wheels"
    (wheel,) = [p for p in build(wheels, sdist=False) if p.suffix == ".whl"]
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    env.update(SAM_CLI_TELEMETRY="0", AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1",
               PIP_FIND_LINKS=" ".join(filter(None, [os.environ.get("PIP_FIND_LINKS"), str(wheel.parent)])))

    # sam build (about 50 s, mostly pip fetching the functions' dependencies) runs while the linters do.
    with subprocess.Popen([str(SAM_TOOLS / "sam"), "build"], cwd=project, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as sam_build:
        try:
            run([str(SAM_TOOLS / "cfn-lint"), "template.yaml", "infra/monitoring.yaml"], project, env)
            run([str(SAM_TOOLS / "sam"), "validate", "--lint"], project, env)
            output, _ = sam_build.communicate(timeout=300)
        finally:
            if sam_build.poll() is None:
                sam_build.kill()
    assert sam_build.returncode == 0, f"sam build failed:\n{output[-4000:]}"

    overrides = tomllib.loads((project / "samconfig.toml").read_text())["default"]["deploy"]["parameters"]
    modules = dict(re.findall(r'(\w+)="([^"]*)"', overrides["parameter_overrides"]))["Modules"]
    for function in ("FlowFunction", "WebhookFunction"):
        built = project / ".aws-sam" / "build" / function
        assert (built / "myapp" / "orders.py").read_text() == ORDERS, "the user's code is in the function"
        # -I -S: only the built code and the standard library (no PYTHONPATH, no site-packages).
        output = run([python311, "-I", "-S", "-c", BUILT_FUNCTION_CHECK, modules], built, env, timeout=60)
        assert "built function imports myapp.orders" in output
