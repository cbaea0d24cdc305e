"""How ``sam build`` builds the functions (``infra/Makefile`` running ``infra/build_function.py``), on a machine
whose only Python on PATH is 3.11.

SAM's own Python builder failed there ("Binary validation failed ... python3.13") and, where it worked, left no
bytecode in the artifact, so every cold start compiled every module. The ``sam`` tests build this repository's
template (from a copy of the checkout, with pip: no uv on PATH) and check the artifact: wheels for CPython 3.13 on
Linux, Python 3.13 bytecode for the code and its dependencies, and an import of the built flow handler with
``python3.13 -I -S`` (the artifact, the runtime's SDK, the standard library). The build without any Python 3.13
still succeeds, without bytecode, and says what to install. The World server's target adds what awsworld's
``serve`` extra lists (read from the installed awsworld's metadata: its function failed every request when a
project's requirements said only ``awsworld==VERSION``), the flow function's httpx; offline, from local wheels.
``tests/deploy/test_init.py`` builds a user's app the same way, with uv.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from cfnlint.decode.cfn_yaml import load

from awsworld.cli.dev_state import LOCK_FILE, STATE_FILE, TABLE_FILE, DevState
from awsworld.deploy import build_function

from .dist import cold_start_bench, copy_source, path_without_python313, python313_env

ROOT = Path(__file__).resolve().parents[2]
SAM = ROOT / ".venv-tools" / "bin" / "sam"
FUNCTIONS = ("FlowFunction", "WebhookFunction", "WorldServerFunction")  # (sam build builds conditional ones too:
# the World server's target makes a placeholder unless samconfig turns it on)
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
class Context:  # what the Lambda runtime hands a handler
    function_name, memory_limit_in_mb, invoked_function_arn, aws_request_id = "smoke", 128, "arn:smoke", "smoke"
answer = webhook.handler({"rawPath": "/", "requestContext": {"http": {"method": "GET"}}}, Context())
assert answer["statusCode"] == 404, answer  # off its route: the handler runs, on the runtime's SDK
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


def test_the_build_knows_awsworld_devs_state_by_the_files_dev_writes() -> None:
    """``build_function.py`` runs without awsworld installed, so it names dev's files itself: the same names."""
    assert build_function.DEV_STATE_FILE == STATE_FILE
    assert set(build_function.DEV_STATE_BESIDE) == {LOCK_FILE, TABLE_FILE}


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


def build_the_webhook_function(code: Path, tmp_path: Path) -> tuple[set[str], str]:
    """The webhook function built from the code folder ``code`` by the repository's Makefile, as ``sam build`` runs
    it there (no Python 3.13: no bytecode to wait for): the files it shipped (relative paths) and what it printed."""
    artifacts = tmp_path / "artifacts"
    env = base_env(path_without_python313()) | {"PYENV_ROOT": str(tmp_path / "no-pyenv"),
                                                "ARTIFACTS_DIR": str(artifacts)}
    done = subprocess.run(["make", "--makefile", str(ROOT / "infra" / "Makefile"), "build-WebhookFunction"],
                          cwd=code, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return {str(path.relative_to(artifacts)) for path in artifacts.rglob("*") if path.is_file()}, done.stdout


def test_awsworld_devs_state_in_the_code_folder_is_left_out_of_the_artifact(tmp_path: Path) -> None:
    """``awsworld dev --state .awsworld`` run from ``src/`` (the CodeUri) kept its snapshots there, and ``sam build``
    copied the folder whole into every function: the runs' arguments, results and payloads, in the clear, in the
    artifact uploaded to S3 and Lambda. The build leaves out a folder holding dev's state, whatever its name, and
    says so; the code beside it (a package of the user's, a ``state.json`` of its own) ships as before."""
    code = tmp_path / "code"
    (code / "orders").mkdir(parents=True)
    (code / "flow.py").write_text("VALUE = 1\n")
    (code / "orders" / "__init__.py").write_text("")
    (code / "orders" / "state.json").write_text("{}")  # the user's own file of that name: not dev's state
    for name in (".awsworld", "runs-kept"):
        state = DevState.load(code / name)
        state.hold()  # what dev writes as it starts (its lock), then its snapshots
        state.save()
        (code / name / TABLE_FILE).write_text('{"input": "payload-of-a-user"}\n')
        state._held.close()
    shipped, output = build_the_webhook_function(code, tmp_path)
    assert shipped == {"flow.py", "orders/__init__.py", "orders/state.json", build_function.CONFIGURATION_STAMP}, \
        shipped
    assert f"left out {code / '.awsworld'}: awsworld dev's state" in output, output


def test_the_copies_init_saved_in_the_code_folder_are_left_out_of_the_artifact(tmp_path: Path) -> None:
    """``awsworld init --force`` (and ``--upgrade --force``) saves the copy of an entry point it overwrites beside
    it in ``src/``, the CodeUri (``flow.py.edited``, ``flow.py.2.edited``): the user's edits, to carry over, which
    the build leaves out, saying so; a module of the user's whose name merely holds the word ships."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "flow.py").write_text("VALUE = 1\n")
    (code / "edited.py").write_text("VALUE = 2\n")
    for name in ("flow.py.edited", "flow.py.2.edited", "requirements.txt.edited"):
        (code / name).write_text("# the user's copy\n")
    shipped, output = build_the_webhook_function(code, tmp_path)
    assert shipped == {"flow.py", "edited.py", build_function.CONFIGURATION_STAMP}, shipped
    assert f"left out {code / 'flow.py.2.edited'}: a copy awsworld init saved" in output, output


def built_files(artifacts: Path) -> dict[str, bytes]:
    return {str(path.relative_to(artifacts)): path.read_bytes() for path in sorted(artifacts.rglob("*"))
            if path.is_file()}


def small_project(project: Path) -> Path:
    """A project as init lays it out, with one module and nothing to install (no package index needed)."""
    (project / "infra").mkdir(parents=True)
    (project / "src").mkdir()
    for name in ("Makefile", "build_function.py"):
        shutil.copy(ROOT / "infra" / name, project / "infra" / name)
    (project / "src" / "flow.py").write_text("def handler(event, context):\n    raise RuntimeError(event)\n")
    (project / "src" / "requirements.txt").write_text("# nothing to install\n")
    (project / "template.yaml").write_text((ROOT / "template.yaml").read_text())
    (project / "samconfig.toml").write_text('[default.deploy.parameters]\nparameter_overrides = "Stage=\\"dev\\""\n')
    return project


def make_target(project: Path, function: str, artifacts: Path, env: dict[str, str]) -> str:
    """What ``sam build`` runs for ``function``: its Makefile target, in the code folder; the build's output."""
    done = subprocess.run(["make", "--makefile", str(project / "infra" / "Makefile"), f"build-{function}"],
                          cwd=project / "src", env=env | {"ARTIFACTS_DIR": str(artifacts)},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def build_small_project(project: Path, artifacts: Path, env: dict[str, str]) -> dict[str, bytes]:
    output = make_target(project, "WebhookFunction", artifacts, env)
    assert "stamped template.yaml, samconfig.toml" in output, output
    return built_files(artifacts)


SERVER_OFF = {
    "no samconfig": None,
    "init's": 'parameter_overrides = "Stage=\\"dev\\" Modules=\\"myapp.orders\\""\n',
    "false": 'parameter_overrides = "Stage=\\"dev\\" WorldServer=\\"false\\""\n',
    "another name": 'parameter_overrides = "MyWorldServer=true WorldServerX=true"\n',
}
SERVER_ON = {
    "init --world-server's": 'parameter_overrides = "Modules=\\"\\" WorldServer=\\"true\\""\n',
    "unquoted": "parameter_overrides = \"Stage=dev WorldServer=true\"\n",
    "prod only": '[default.deploy.parameters]\nparameter_overrides = "Stage=dev"\n'
                 '[prod.deploy.parameters]\nparameter_overrides = "Stage=prod WorldServer=true"\n',
}


@pytest.mark.parametrize("samconfig", [*SERVER_OFF, *SERVER_ON])
def test_the_world_server_is_built_only_when_a_samconfig_turns_it_on(tmp_path: Path, samconfig: str) -> None:
    """``sam build`` builds every function, the World server's too when its ``Condition`` leaves it out of the
    stack: about 48 MB built and compiled (17 MB zipped) that every deploy uploaded for nothing. Its target builds
    it only when a samconfig file sets ``WorldServer=true`` (in any config environment: the build cannot know which
    one the deploy takes); otherwise the artifact is a placeholder ``serve.py`` of a few hundred bytes whose import
    fails saying what to set, should a command-line override deploy it anyway."""
    project = small_project(tmp_path / "shop")
    (project / "src" / "serve.py").write_text("VALUE = 1\n")
    text = {**SERVER_OFF, **SERVER_ON}[samconfig]
    if text is None:
        (project / "samconfig.toml").unlink()
    else:
        (project / "samconfig.toml").write_text(text if text.startswith("[") else
                                                f"[default.deploy.parameters]\n{text}")
    env = base_env(path_without_python313()) | {"PYENV_ROOT": str(tmp_path / "no-pyenv")}
    artifacts = tmp_path / "WorldServerFunction"
    output = make_target(project, "WorldServerFunction", artifacts, env)
    built = built_files(artifacts)
    if samconfig in SERVER_ON:
        assert "with pip for CPython 3.13 x86_64" in output and "placeholder" not in output, output
        assert built["serve.py"] == b"VALUE = 1\n" and "requirements.txt" in built, sorted(built)
        return
    assert "WorldServerFunction: WorldServer is not true in samconfig.toml: a placeholder serve.py, nothing " \
           "installed; stamped" in output, output
    assert set(built) == {"serve.py", build_function.CONFIGURATION_STAMP}, sorted(built)
    assert sum(map(len, built.values())) < 1_000, "a placeholder, not a function"
    imported = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, '.'); import serve"],
                              cwd=artifacts, capture_output=True, text=True, timeout=60, check=False)
    assert imported.returncode == 1, imported
    assert 'RuntimeError: this function was built as a placeholder: no samconfig file of the project set ' \
           'WorldServer=true when sam build ran. Add WorldServer=\\"true\\" to parameter_overrides in ' \
           'samconfig.toml, then sam build && sam deploy' in imported.stderr, imported.stderr


def test_a_change_of_parameters_alone_changes_the_artifact_and_so_publishes_a_version(tmp_path: Path) -> None:
    """SAM publishes a version behind ``live`` (what the queue's event source and the webhook URL invoke) only when
    its hash of the function changes, and it hashes ``!Ref LogLevel``, not the value (stamp_deploy_configuration):
    a ``LogLevel=DEBUG`` added to ``parameter_overrides`` deployed onto the unpublished function only. The build
    stamps the digest of ``samconfig.toml`` and ``template.yaml`` into the artifact: the same files build the same
    bytes (the zip, its S3 key, no new version), a changed one other bytes; the stamp holds no value."""
    project = small_project(tmp_path / "shop")
    samconfig = project / "samconfig.toml"
    env = base_env(path_without_python313()) | {"PYENV_ROOT": str(tmp_path / "no-pyenv")}

    def build(name: str) -> dict[str, bytes]:
        return build_small_project(project, tmp_path / name, env)

    first, again = build("first"), build("again")
    assert first == again, "the same code and configuration build the same artifact: no version is published"
    samconfig.write_text(samconfig.read_text().replace('Stage=\\"dev\\"', 'Stage=\\"dev\\" LogLevel=\\"DEBUG\\"'))
    changed = build("changed")
    assert set(changed) == set(first) and changed != first
    stamp = changed[build_function.CONFIGURATION_STAMP].decode()
    assert stamp != first[build_function.CONFIGURATION_STAMP].decode()
    assert "DEBUG" not in stamp and stamp.splitlines()[1].endswith("  samconfig.toml"), stamp
    expected = hashlib.sha256(samconfig.read_bytes()).hexdigest()
    assert stamp.splitlines()[1] == f"{expected}  samconfig.toml"


def test_the_bytecode_names_its_sources_under_var_task_so_any_folder_builds_the_same_bytes(tmp_path: Path) -> None:
    """compileall wrote each source's build path into its ``.pyc`` (``/home/alice/shop/.aws-sam/build/...``): the
    builder's folders and user name shipped in the artifact, and the same code built in another folder (a CI
    runner, a colleague's checkout) was another zip, so another version. The build names them as Lambda lays them
    out (``/var/task``), where a traceback's lines point."""
    try:
        python313 = cold_start_bench().find_python("3.13")
    except SystemExit:
        pytest.skip("no python3.13 to compile with, on PATH or in pyenv")
    env = base_env(path_without_python313()) | python313_env(python313)
    built = [build_small_project(small_project(tmp_path / folder / "shop"), tmp_path / f"{folder}-artifacts", env)
             for folder in ("alice", "bob")]
    assert built[0] == built[1], "the same project builds the same bytes wherever it sits"
    (pyc,) = [name for name in built[0] if name.endswith(".pyc")]
    code = subprocess.run([python313, "-c", "import marshal, sys; f = open(sys.argv[1], 'rb'); f.read(16); "
                           "print(marshal.load(f).co_filename)", str(tmp_path / "alice-artifacts" / pyc)],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert code == "/var/task/flow.py", code
    assert str(tmp_path).encode() not in built[0][pyc]


def wheel(folder: Path, name: str, version: str, *requires: str) -> Path:
    """A pure-Python wheel of one empty module, whose METADATA lists ``requires`` (``Requires-Dist`` lines)."""
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": "",
             f"{info}/METADATA": "Metadata-Version: 2.1\n"
                                 f"Name: {name}\nVersion: {version}\n"
                                 + "".join(f"Provides-Extra: {e}\n" for e in ("serve", "aws-sdk"))
                                 + "".join(f"Requires-Dist: {line}\n" for line in requires),
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: awsworld-tests\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for file, text in files.items():
            archive.writestr(file, text)
        archive.writestr(f"{info}/RECORD", "".join(f"{file},,\n" for file in files) + f"{info}/RECORD,,\n")
    return path


# An awsworld whose serve extra is two packages that share a dependency with awsworld itself, another extra that
# must stay out, and a marker beside the extra's (evaluated for the runtime's 3.13, so that one is left out too).
FAKE_AWSWORLD = ("awsworld", "99.0", "shared>=1", 'httpx>=99; extra == "serve"',
                 'mangum>=99; extra == "serve" and python_version >= "3.9"',
                 'oldpy; python_version < "3.10" and extra == "serve"', 'boto3; extra == "aws-sdk"')
FAKE_WHEELS = (FAKE_AWSWORLD, ("httpx", "99.0", "shared>=1", "anyio"), ("mangum", "99.0"), ("anyio", "99.0"),
               ("shared", "1.0"), ("shared", "2.0"), ("oldpy", "99.0"), ("boto3", "99.0"))


def dist_infos(artifacts: Path) -> set[str]:
    return {path.name for path in artifacts.glob("*.dist-info")}


@pytest.mark.parametrize("route", ["pip", "uv"])
@pytest.mark.parametrize("requirement", ["awsworld==99.0", "awsworld[serve]==99.0"])
def test_the_world_server_gets_the_serve_extra_and_the_flow_function_httpx_from_awsworlds_metadata(
        tmp_path: Path, route: str, requirement: str) -> None:
    """A project's requirements say ``awsworld==VERSION`` (what init writes): the Makefile's World server target
    adds what the installed awsworld lists for its serve extra (mangum, Starlette: without them every request
    failed), the flow function's only httpx (its pushed deliveries), the webhook function's nothing; each build
    says what it added. A project whose requirements already say ``awsworld[serve]`` builds the same artifacts,
    with nothing added twice. Offline: the wheels are local (pip's and uv's index switched off)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (tmp_path / "no-index").mkdir()  # uv's index: an empty folder (uv's --offline excludes the build's --refresh)
    for spec in FAKE_WHEELS:
        wheel(wheels, *spec)
    code = tmp_path / "code"
    code.mkdir()
    (code / "serve.py").write_text("VALUE = 1\n")
    (code / "requirements.txt").write_text(f"{requirement}\nshared==1.0\n")  # the user's pin of a shared dep
    # The project (the folder above infra/) deploys the World server: else its target builds a placeholder.
    (tmp_path / "infra").mkdir()
    for name in ("Makefile", "build_function.py"):
        shutil.copy(ROOT / "infra" / name, tmp_path / "infra" / name)
    (tmp_path / "samconfig.toml").write_text("[default.deploy.parameters]\n" + SERVER_ON["init --world-server's"])
    tools = tmp_path / "bin"
    tools.mkdir()
    if route == "uv":
        uv = Path(sys.executable).with_name("uv")
        if not uv.exists():
            pytest.skip(f"uv is not installed beside {sys.executable}")
        (tools / "uv").symlink_to(uv)
    env = base_env(path_without_python313(tools)) | {
        "PYENV_ROOT": str(tmp_path / "no-pyenv"), "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1",
        "UV_DEFAULT_INDEX": (tmp_path / "no-index").as_uri(), "UV_PYTHON_DOWNLOADS": "never",
        "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    built: dict[str, set[str]] = {}
    for function in FUNCTIONS:
        artifacts = tmp_path / function
        done = subprocess.run(["make", "--makefile", str(tmp_path / "infra" / "Makefile"), f"build-{function}"],
                              cwd=code, env=env | {"ARTIFACTS_DIR": str(artifacts)}, capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"with {route} for CPython 3.13 x86_64;" in done.stdout, done.stdout
        built[function] = dist_infos(artifacts)
        said = next(line for line in done.stdout.splitlines() if line.startswith(f"awsworld build: {function}:"))
        extra = "[serve]" in requirement
        if function == "WorldServerFunction":
            assert ("'serve' extra was already installed" if extra else
                    "added awsworld's 'serve' extra: anyio 99.0, httpx 99.0, mangum 99.0;") in said, said
        elif function == "FlowFunction":
            assert ("httpx of awsworld's 'serve' extra was already installed" if extra else
                    "added httpx of awsworld's 'serve' extra: anyio 99.0, httpx 99.0;") in said, said
        else:
            assert "extra" not in said, said
        assert (artifacts / "serve.py").is_file() and not (artifacts / "bin").exists()
    common = {"awsworld-99.0.dist-info", "shared-1.0.dist-info"}
    serve = {"httpx-99.0.dist-info", "anyio-99.0.dist-info", "mangum-99.0.dist-info"}
    assert built["WorldServerFunction"] == common | serve, "one copy of each, the user's pin of shared kept"
    assert built["FlowFunction"] == (common | serve if "[serve]" in requirement else
                                     common | {"httpx-99.0.dist-info", "anyio-99.0.dist-info"})
    assert built["WebhookFunction"] == (common | serve if "[serve]" in requirement else common)


def test_a_lock_another_user_left_at_the_old_shared_name_neither_redirects_nor_hangs_the_build(
        tmp_path: Path) -> None:
    """The install's lock was ``$TMPDIR/awsworld-build-<digest of the project's path>.lock``, a name another local
    user could make first: a symlink there made the build truncate the file it named, and a file there that they
    kept locked made every build of the project wait for good. The lock is the project's own now
    (``.aws-sam/awsworld-build.lock``, 0600, never opened through a symlink): the build ignores both, and a symlink
    at its own lock stops it with a message instead of being followed."""
    project = tmp_path / "project"
    (project / "infra").mkdir(parents=True)
    for name in ("Makefile", "build_function.py"):
        shutil.copy(ROOT / "infra" / name, project / "infra" / name)
    code = project / "src"
    code.mkdir()
    (code / "flow.py").write_text("VALUE = 1\n")
    (code / "requirements.txt").write_text("shared==1.0\n")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel(wheels, "shared", "1.0")
    shared = tmp_path / "tmp"  # the machine's temporary folder, which every local user can write
    shared.mkdir()
    old = shared / f"awsworld-build-{hashlib.sha256(str(project.resolve()).encode()).hexdigest()[:16]}.lock"
    victim = tmp_path / "victim.txt"  # a file of the user's the other user's symlink names
    victim.write_text("the user's data\n")
    env = base_env(path_without_python313()) | {"PYENV_ROOT": str(tmp_path / "no-pyenv"), "TMPDIR": str(shared),
                                                "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1"}

    def build() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["make", "--makefile", str(project / "infra" / "Makefile"), "build-WebhookFunction"],
                              cwd=code, env=env | {"ARTIFACTS_DIR": str(tmp_path / "artifacts")},
                              capture_output=True, text=True, timeout=120, check=False)

    old.symlink_to(victim)
    done = build()
    assert done.returncode == 0, done.stdout + done.stderr
    assert victim.read_text() == "the user's data\n", "the symlink was followed"
    lock = project / ".aws-sam" / "awsworld-build.lock"
    assert lock.is_file() and not lock.is_symlink() and lock.stat().st_mode & 0o777 == 0o600

    old.unlink()
    with old.open("w") as held:  # made first, and locked for good
        fcntl.flock(held, fcntl.LOCK_EX)
        done = build()  # (waited for good: this run's timeout)
    assert done.returncode == 0, done.stdout + done.stderr

    lock.unlink()
    lock.symlink_to(victim)  # its own lock, a symlink: refused, not followed
    done = build()
    assert done.returncode != 0 and f"the build's lock {lock} cannot be opened" in done.stderr, done.stderr
    assert victim.read_text() == "the user's data\n"


@pytest.mark.parametrize(("metadata", "extra", "expected"), [
    ('Requires-Dist: a>=1; extra == "serve"\nRequires-Dist: b\nRequires-Dist: c; extra == "local"\n', "serve",
     ["a>=1"]),
    ("Requires-Dist: a[x]>=1 ; extra=='serve'\n", "serve", ["a[x]>=1"]),
    ('Requires-Dist: a; python_version < "3.12" and extra == "serve"\n', "serve", ['a; python_version < "3.12"']),
    ('Requires-Dist: a; extra == "serve" and sys_platform == "linux"\n', "serve", ['a; sys_platform == "linux"']),
    ('Requires-Dist: a; extra == "serve-more"\nRequires-Dist: b\n', "serve", []),
])
def test_an_extras_requirements_are_read_from_metadata_without_the_extra_clause(
        metadata: str, extra: str, expected: list[str]) -> None:
    assert build_function.extra_requirements(f"Name: awsworld\nVersion: 1\n{metadata}", extra) == expected


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
    # The repository's samconfig.toml leaves WorldServer off: its function's artifact is a placeholder.
    assert log.count("with pip for CPython 3.13 x86_64;") == len(FUNCTIONS) - 1, log[-3000:]
    assert "WorldServerFunction: WorldServer is not true in samconfig.toml: a placeholder serve.py" in log
    placeholder = project / ".aws-sam" / "build" / "WorldServerFunction"
    assert {entry.name for entry in placeholder.iterdir()} == {"serve.py", build_function.CONFIGURATION_STAMP}
    runtime_sdk = cold_start.runtime_sdk(python313, tmp_path / "runtime-sdk")
    for function in FUNCTIONS[:2]:
        built = project / ".aws-sam" / "build" / function
        assert any(built.glob("pydantic_core/_pydantic_core.cpython-313-x86_64-linux-gnu.so")), \
            "pydantic_core's wheel is the runtime's (CPython 3.13, Linux x86_64), not this machine's 3.11"
        assert not (built / "bin").exists(), "no console scripts naming the build machine's interpreter"
        bundled = {"boto3", "botocore", "aiohttp"} & {entry.name for entry in built.iterdir()}
        assert not bundled, f"the runtime has the SDK: the artifact bundles {bundled}"
        assert pyc_count(built / "awsworld") >= 100 and pyc_count(built / "pydantic") >= 50
        assert (built / "__pycache__" / "flow.cpython-313.pyc").is_file(), "the entry point is compiled too"
        output = subprocess.run([python313, "-I", "-S", "-B", "-c", IMPORT_CHECK, str(runtime_sdk)], cwd=built,
                                capture_output=True, text=True, timeout=120, check=False)
        assert output.returncode == 0 and "built function imports" in output.stdout, output.stderr[-3000:]
