"""``awsworld init`` and ``awsworld template``, run as processes the way a user runs them.

The quick tests hold the file-level promises: the repository's template.yaml, infra/ and handlers/ are the
packaged ones (one source of truth), existing files are never overwritten without --force, a project's
.gitignore gains the entries it lacks and keeps its lines, a module at the project's root is refused with the
move that fixes it, and the generated samconfig names real parameters. The ``sam`` test turns a fresh project
with one workflow module (and the clutter a real project has: dev state, tests, virtual environments, env files,
logs) into a SAM app, lints it, builds it by the very commands init prints on a machine whose only Python on
PATH is 3.11 (with uv), checks the artifact holds the user's code, its dependencies and their Python 3.13
bytecode and nothing else (no AWS SDK: the runtime has one), and imports the built function with nothing but its
own code, the runtime's SDK and the standard library, as Lambda would. Deselect it with ``-m "not sam"``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from cfnlint.decode.cfn_yaml import load

from awsworld import __version__
from awsworld.deploy import (
    GITIGNORE_ENTRIES,
    HANDLERS,
    MANIFEST_PATH,
    build_script_text,
    handler_text,
    makefile_text,
    monitoring_text,
    requirements_text,
    samconfig_text,
    template_text,
)
from awsworld.deploy.build_function import CONFIGURATION_STAMP
from awsworld.deploy.init import GUIDED_WEBHOOK_ANSWER
from awsworld.deploy.manifest import digest

from .dist import cold_start_bench, path_without_python313, python313_env

ROOT = Path(__file__).resolve().parents[2]
AWSWORLD = str(Path(sys.executable).with_name("awsworld"))
SAM_TOOLS = ROOT / ".venv-tools" / "bin"
WRITTEN = {"template.yaml", "infra/monitoring.yaml", "infra/Makefile", "infra/build_function.py", "samconfig.toml",
           "src/requirements.txt", "src/flow.py", "src/webhook.py", "src/serve.py", MANIFEST_PATH}
#: The files that are awsworld's, which the record lists and ``init --upgrade`` rewrites.
OWNED = WRITTEN - {"samconfig.toml", "src/requirements.txt", MANIFEST_PATH}

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


def make_project(path: Path, code: str = "src") -> Path:
    """A project with one workflow package, in the src layout init builds from (``code=""``: at the root)."""
    package = path / code / "myapp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "orders.py").write_text(ORDERS)
    return path


def next_steps(stdout: str) -> list[str]:
    """The commands init's next steps print (indented lines after ``next:``), comments left out."""
    lines = stdout[stdout.index("\nnext: "):].splitlines()[2:]
    return [line.strip() for line in lines if line.startswith("  ") and not line.strip().startswith("#")]


# ------------------------------------------------------------------------------------------ one source of truth


def test_the_repositorys_sam_files_are_the_packaged_ones() -> None:
    """Edit src/awsworld/deploy/, then regenerate: the failure message says how."""
    regenerate = "edit src/awsworld/deploy/template.yaml, then: awsworld template --code-uri handlers/ > template.yaml"
    assert (ROOT / "template.yaml").read_text() == template_text("handlers/"), regenerate
    assert (ROOT / "infra" / "monitoring.yaml").read_text() == monitoring_text(), \
        "edit src/awsworld/deploy/monitoring.yaml, then: awsworld template --monitoring > infra/monitoring.yaml"
    assert (ROOT / "infra" / "Makefile").read_text() == makefile_text(), \
        "edit src/awsworld/deploy/Makefile, then: awsworld template --makefile > infra/Makefile"
    assert (ROOT / "infra" / "build_function.py").read_text() == build_script_text(), \
        "edit src/awsworld/deploy/build_function.py, then: awsworld template --build-script > infra/build_function.py"
    for route in HANDLERS:
        assert (ROOT / "handlers" / f"{route}.py").read_text() == handler_text(route), route
    assert template_text("handlers/").count("CodeUri: handlers/") == 1
    assert template_text() == template_text("src/"), "the packaged template builds from the project's src/"
    assert template_text().count("CodeUri: src/") == 1


def test_awsworld_template_prints_the_packaged_files(tmp_path: Path) -> None:
    done = awsworld("template", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == template_text()
    monitoring = awsworld("template", "--monitoring", cwd=tmp_path)
    assert monitoring.returncode == 0 and monitoring.stdout == monitoring_text()
    makefile = awsworld("template", "--makefile", cwd=tmp_path)
    assert makefile.returncode == 0 and makefile.stdout == makefile_text()
    script = awsworld("template", "--build-script", cwd=tmp_path)
    assert script.returncode == 0 and script.stdout == build_script_text()


# ------------------------------------------------------------------------------------------ init


def test_init_help_names_every_file_init_writes(tmp_path: Path) -> None:
    """The help (and the CLI reference generated from it) lists what ``awsworld init`` writes: a file it left
    out (src/serve.py was) is one a user does not expect to find in the project or in ``--upgrade``'s rewrite."""
    done = awsworld("init", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = " ".join(done.stdout.split())
    assert not [path for path in sorted(WRITTEN) if Path(path).name not in shown], shown


def test_init_writes_the_app_wired_to_the_users_modules(tmp_path: Path) -> None:
    project = make_project(tmp_path / "my_shop")
    (project / "requirements.txt").write_text("pytest\n")  # the project's own (dev) requirements: left alone
    done = awsworld("init", "--module", "myapp.orders", "-m", "myapp.other", cwd=project)
    assert done.returncode == 0, done.stderr
    assert next_steps(done.stdout)[-2:] == ["PIP_FIND_LINKS=dist sam build", "sam deploy --guided"], done.stdout
    assert "sam build packages src/ only" in done.stdout
    assert "myapp.other is not myapp/other.py under src" in done.stderr, "a module outside src/ is pointed out"
    assert {str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()} - {
        "src/myapp/__init__.py", "src/myapp/orders.py", "requirements.txt"} == WRITTEN | {".gitignore"}
    assert (project / ".gitignore").read_text().splitlines()[1:] == list(GITIGNORE_ENTRIES)
    assert ".gitignore: added .awsworld/ .aws-sam/ dist/" in done.stdout
    assert (project / "requirements.txt").read_text() == "pytest\n"
    assert (project / "template.yaml").read_text() == template_text()
    assert (project / "infra" / "monitoring.yaml").read_text() == monitoring_text()
    assert f"\nawsworld=={__version__}\n" in (project / "src" / "requirements.txt").read_text()
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
        assert (project / "src" / f"{route}.py").read_text() == handler_text(route)


def overrides_of(project: Path) -> dict[str, dict[str, str]]:
    """Each environment's ``parameter_overrides`` of the project's samconfig.toml, as name -> value, after checking
    every one is a parameter of the project's template with a value it accepts."""
    config = tomllib.loads((project / "samconfig.toml").read_text())
    template = load(str(project / "template.yaml"))
    found = {}
    for env in ("default", "prod"):
        overrides = dict(re.findall(r'(\w+)="([^"]*)"', config[env]["deploy"]["parameters"]["parameter_overrides"]))
        for name, value in overrides.items():
            spec = template["Parameters"][name]
            assert value in [str(v) for v in spec.get("AllowedValues", [value])], (env, name)
            assert re.fullmatch(spec.get("AllowedPattern", ".*"), value), (env, name)
        found[env] = overrides
    return found


def test_a_typescript_only_project_inits_the_world_server_without_a_module(tmp_path: Path) -> None:
    """A TypeScript project has no Python workflow module: ``--world-server`` without ``-m`` writes the same app
    with ``Modules`` empty (not left out: the template's default is the example module) and ``WorldServer=true``,
    and says where the server's URL comes from and what PushHosts is for."""
    project = tmp_path / "ts-app"
    project.mkdir()
    (project / "package.json").write_text("{}\n")
    done = awsworld("init", "--world-server", cwd=project)
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert {str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()} == \
        WRITTEN | {".gitignore", "package.json"}
    assert "workflow modules: none, the World server and its deliveries only; WorldServer=true" in done.stdout
    assert "WorldServerUrl" in done.stdout and 'PushHosts=\\"app.example\\"' in done.stdout, done.stdout
    assert next_steps(done.stdout)[-2:] == ["PIP_FIND_LINKS=dist sam build", "sam deploy --guided"], done.stdout
    for env, overrides in overrides_of(project).items():
        assert overrides["Modules"] == "" and overrides["WorldServer"] == "true", (env, overrides)
    assert f"\nawsworld=={__version__}\n" in (project / "src" / "requirements.txt").read_text(), \
        "no [serve] to remember: the Makefile adds it to the World server's build"
    with_module = make_project(tmp_path / "both")
    done = awsworld("init", "-m", "myapp.orders", "--world-server", cwd=with_module)
    assert done.returncode == 0, done.stderr
    assert {env: (o["Modules"], o["WorldServer"]) for env, o in overrides_of(with_module).items()} == {
        "default": ("myapp.orders", "true"), "prod": ("myapp.orders", "true")}
    plain = make_project(tmp_path / "python")
    assert awsworld("init", "-m", "myapp.orders", cwd=plain).returncode == 0
    assert "WorldServer" not in overrides_of(plain)["default"], "the template's default (false) stays"
    assert "PushHosts" not in overrides_of(plain)["default"], "nor PushHosts's (localhost)"


def test_push_hosts_are_written_into_samconfig_and_a_url_is_refused(tmp_path: Path) -> None:
    """``--push-host`` (with ``--world-server``) writes ``PushHosts``, so the TypeScript app's host need not be
    added by hand; a URL or a host:port is refused before anything is written, and so is the flag without the
    World server (it would name hosts nothing POSTs to)."""
    project = tmp_path / "app"
    project.mkdir()
    done = awsworld("init", "--world-server", "--push-host", "App.Example", "--push-host", "10.0.0.7", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "POSTs messages to app.example, 10.0.0.7 (PushHosts in samconfig.toml)" in done.stdout, done.stdout
    for env, overrides in overrides_of(project).items():
        assert overrides["PushHosts"] == "app.example,10.0.0.7", (env, overrides)
    for bad in ("https://app.example", "app.example:3000", "a,b"):
        other = tmp_path / f"bad{len(bad)}"
        other.mkdir()
        refused = awsworld("init", "--world-server", "--push-host", bad, cwd=other)
        assert refused.returncode == 1 and f"--push-host {bad!r} is not a host name" in refused.stderr, refused
        assert not any(other.iterdir()), "nothing written"
    alone = awsworld("init", "-m", "myapp.orders", "--push-host", "app.example", cwd=make_project(tmp_path / "x"))
    assert alone.returncode == 1 and "give --world-server too" in alone.stderr, alone.stderr


def test_the_push_host_hint_of_a_world_server_init_works_as_printed(tmp_path: Path) -> None:
    """``awsworld init --world-server stack`` says PushHosts must list the app's host: "init again with --push-host
    app.example". Typed so, the second init stopped (the files the first wrote exist, so nothing is overwritten
    without ``--force``; and ``--upgrade`` refuses ``--push-host``). The hint's options, added to the first init's,
    now write PushHosts."""
    stack = tmp_path / "stack"
    stack.mkdir()
    first = awsworld("init", "--world-server", "stack", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = re.search(r"init again with ((?:--?[\w-]+(?: [\w.]+)? ?)+)", first.stdout)
    assert again is not None, first.stdout
    second = awsworld("init", "--world-server", *again.group(1).split(), "stack", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    for env, overrides in overrides_of(stack).items():
        assert overrides["PushHosts"] == "app.example" and overrides["WorldServer"] == "true", (env, overrides)


def test_sam_reads_an_empty_modules_override_as_an_empty_parameter(tmp_path: Path) -> None:
    """SAM's parser of ``parameter_overrides`` (the SAM tools venv's) reads ``Modules=""`` as the empty string,
    which the template passes to the functions as ``AWSWORLD_MODULES`` (no module imported)."""
    python = SAM_TOOLS / "python"
    if not python.exists():
        pytest.skip(f"the SAM tools venv is missing ({SAM_TOOLS.parent}: .ci/run creates it)")
    assert awsworld("init", "--world-server", cwd=tmp_path).returncode == 0
    line = tomllib.loads((tmp_path / "samconfig.toml").read_text())["default"]["deploy"]["parameters"][
        "parameter_overrides"]
    parse = ("import json, sys\nfrom samcli.cli.types import CfnParameterOverridesType\n"
             "print(json.dumps(CfnParameterOverridesType().convert([sys.argv[1]], None, None)))")
    done = subprocess.run([str(python), "-c", parse, line], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    parsed = json.loads(done.stdout)
    assert parsed["Modules"] == "" and parsed["WorldServer"] == "true" and parsed["Stage"] == "dev", parsed


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    project = make_project(tmp_path / "shop")
    (project / "src" / "requirements.txt").write_text("requests\n")
    refused = awsworld("init", str(project), "-m", "myapp.orders", cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.strip().count("\n") == 0, "one line"
    assert "src/requirements.txt already exists" in refused.stderr and "--force" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (project / "src" / "requirements.txt").read_text() == "requests\n"
    assert not (project / "template.yaml").exists(), "nothing is written when anything would be overwritten"
    forced = awsworld("init", str(project), "-m", "myapp.orders", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert f"awsworld=={__version__}" in (project / "src" / "requirements.txt").read_text()
    assert next_steps(forced.stdout)[0] == f"cd {project}", "run from elsewhere: the steps start with the cd"


def test_upgrade_rewrites_awsworlds_files_and_keeps_the_users(tmp_path: Path) -> None:
    """After upgrading awsworld: ``init --upgrade`` brings template, infra/ and handlers to this version and pins
    its line of the requirements, and leaves samconfig.toml and the user's requirement lines as they were."""
    project = make_project(tmp_path / "shop")
    assert awsworld("init", "-m", "myapp.orders", cwd=project).returncode == 0
    samconfig, requirements = project / "samconfig.toml", project / "src" / "requirements.txt"
    samconfig.write_text(samconfig.read_text() + '# sam deploy --guided saved: region = "eu-west-1"\n')
    answers = samconfig.read_text()
    requirements.write_text("# mine\nrequests==2.32.3\nawsworld==0.0.1  # the stack's\nboto3-stubs  # types only\n")
    written_by_an_older_awsworld(project, {"template.yaml": "# what an older awsworld wrote\n"})
    (project / "infra" / "Makefile").unlink()
    done = awsworld("init", "--upgrade", cwd=project)
    assert done.returncode == 0, done.stderr
    assert f"awsworld {__version__}: rewrote template.yaml, infra/Makefile, src/requirements.txt, {MANIFEST_PATH};" \
        in done.stdout
    assert (project / "template.yaml").read_text() == template_text()
    assert (project / "infra" / "Makefile").read_text() == makefile_text()
    assert not saved_copies(project) and "saved" not in done.stdout, "nothing of the user's was at stake"
    assert record_of(project) == {"awsworld": __version__, "files": written_digests(project)}
    assert requirements.read_text() == \
        f"# mine\nrequests==2.32.3\nawsworld=={__version__}  # the stack's\nboto3-stubs  # types only\n"
    assert samconfig.read_text() == answers
    # The stack exists: an update is build and deploy with the settings samconfig.toml saved, not --guided's
    # questions again (which would offer to overwrite those settings).
    assert next_steps(done.stdout)[-2:] == ["PIP_FIND_LINKS=dist sam build", "sam deploy"], done.stdout
    assert "--guided" not in done.stdout and "samconfig.toml holds the stack's settings" in done.stdout
    again = awsworld("init", "--upgrade", cwd=project)
    assert again.returncode == 0 and f"awsworld {__version__}: nothing to rewrite;" in again.stdout, again


def written_by_an_older_awsworld(project: Path, files: dict[str, str]) -> None:
    """Make ``project`` what an older awsworld's init left: ``files`` (path -> its older text) written, and the
    record holding their digests and that older version."""
    record = json.loads((project / MANIFEST_PATH).read_text())
    for path, text in files.items():
        (project / path).write_text(text)
        record["files"][path] = digest(text.encode())
    record["awsworld"] = "0.0.9"
    (project / MANIFEST_PATH).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def record_of(project: Path) -> dict[str, object]:
    """The project's record, without its line for readers."""
    record = json.loads((project / MANIFEST_PATH).read_text())
    del record["about"]
    return record


def written_digests(project: Path) -> dict[str, str]:
    """The sha256 of each of awsworld's files in ``project`` as they are now."""
    return {path: hashlib.sha256((project / path).read_bytes()).hexdigest() for path in sorted(OWNED)}


def saved_copies(project: Path) -> dict[str, bytes]:
    """The copies init saved in ``project`` (``FILE.edited``, ``FILE.2.edited``, ...), by relative path."""
    return {str(path.relative_to(project)): path.read_bytes() for path in sorted(project.rglob("*.edited"))}


def files_of(project: Path) -> dict[str, bytes]:
    return {str(path.relative_to(project)): path.read_bytes() for path in project.rglob("*") if path.is_file()}


def test_init_records_the_digest_of_each_of_awsworlds_files_deterministically(tmp_path: Path) -> None:
    """The record lists awsworld's files (not samconfig.toml nor the requirements: the user's from the start) by
    the sha256 of their bytes, with the version; two projects of different names and modules get the same bytes,
    sorted, one file a line, so a commit of it diffs cleanly."""
    one = make_project(tmp_path / "one")
    two = make_project(tmp_path / "two")
    assert awsworld("init", "-m", "myapp.orders", cwd=one).returncode == 0
    assert awsworld("init", "-m", "myapp.other", "--world-server", cwd=two).returncode == 0
    assert record_of(one) == {"awsworld": __version__, "files": written_digests(one)}
    text = (one / MANIFEST_PATH).read_text()
    assert text == (two / MANIFEST_PATH).read_text() and text.endswith("}\n")
    assert re.findall(r'^    "([^"]+)": "[0-9a-f]{64}",?$', text, re.MULTILINE) == sorted(OWNED), text


def test_upgrade_refuses_to_overwrite_an_edited_file_and_force_saves_it_first(tmp_path: Path) -> None:
    """A user's edit of awsworld's files (an IAM statement for a step, in template.yaml; a line in an entry point)
    stops ``init --upgrade`` before it writes anything, naming each edited file and the ways on; ``--upgrade
    --force`` saves each copy beside it (never over an earlier one), says where, and writes this version's."""
    project = make_project(tmp_path / "shop")
    assert awsworld("init", "-m", "myapp.orders", cwd=project).returncode == 0
    template, flow = project / "template.yaml", project / "src" / "flow.py"
    edited = template_text().replace("Resources:\n", "Resources:\n  # my step's s3:GetObject statement\n", 1)
    assert edited != template_text()
    template.write_text(edited)
    flow.write_text(flow.read_text() + "import myapp.orders  # mine\n")
    written_by_an_older_awsworld(project, {"infra/Makefile": "# an older Makefile\n"})
    before = files_of(project)
    refused = awsworld("init", "--upgrade", cwd=project)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "would overwrite your edits to template.yaml and src/flow.py (changed since awsworld 0.0.9" \
        in refused.stderr, refused.stderr
    assert "infra/Makefile" not in refused.stderr, "the older Makefile is awsworld's, as its record says"
    assert ("template parameter (docs/operate/deploy.md; your steps' permissions and VPC: "
            "docs/how-to/aws-from-steps.md)") in refused.stderr
    assert "awsworld init --upgrade --force saves your copies as template.yaml.edited and src/flow.py.edited" \
        in refused.stderr, refused.stderr
    assert files_of(project) == before, "nothing written"

    forced = awsworld("init", "--upgrade", "--force", cwd=project)
    assert forced.returncode == 0, forced.stderr
    assert ("saved before rewriting: template.yaml as template.yaml.edited (edited since awsworld 0.0.9 wrote it), "
            "src/flow.py as src/flow.py.edited (edited since awsworld 0.0.9 wrote it)") in forced.stdout, forced.stdout
    assert saved_copies(project) == {"src/flow.py.edited": before["src/flow.py"],
                                     "template.yaml.edited": before["template.yaml"]}
    assert template.read_text() == template_text() and flow.read_text() == handler_text("flow")
    assert (project / "infra" / "Makefile").read_text() == makefile_text()
    assert record_of(project) == {"awsworld": __version__, "files": written_digests(project)}

    template.write_text(edited.replace("s3:GetObject", "sqs:SendMessage"))
    again = awsworld("init", "--upgrade", "--force", cwd=project)
    assert again.returncode == 0 and "template.yaml as template.yaml.2.edited" in again.stdout, again.stdout
    assert saved_copies(project)["template.yaml.edited"] == before["template.yaml"], "an earlier copy stays"
    assert "sqs:SendMessage" in saved_copies(project)["template.yaml.2.edited"].decode()


def test_upgrade_of_a_project_without_a_record_saves_each_file_that_differs(tmp_path: Path) -> None:
    """An app an earlier awsworld initialised has no record: an edit cannot be told from an older file, so each of
    awsworld's files that differs from this version's is saved before it is rewritten (a file equal to it is
    not), the output says why, and the record is written for the next upgrade."""
    project = make_project(tmp_path / "shop")
    assert awsworld("init", "-m", "myapp.orders", cwd=project).returncode == 0
    (project / MANIFEST_PATH).unlink()
    (project / "template.yaml").write_text("# an older awsworld's, or an edit\n")
    done = awsworld("init", "--upgrade", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "saved before rewriting: template.yaml as template.yaml.edited (it differed" in done.stdout, done.stdout
    assert f"no {MANIFEST_PATH} (an earlier awsworld initialised this app)" in done.stdout
    assert saved_copies(project) == {"template.yaml.edited": b"# an older awsworld's, or an edit\n"}
    assert (project / "template.yaml").read_text() == template_text()
    assert record_of(project) == {"awsworld": __version__, "files": written_digests(project)}


def test_upgrade_reads_a_crlf_checkout_as_unedited(tmp_path: Path) -> None:
    """git's core.autocrlf on Windows turns the files' line endings into CRLF: not an edit."""
    project = make_project(tmp_path / "shop")
    assert awsworld("init", "-m", "myapp.orders", cwd=project).returncode == 0
    written_by_an_older_awsworld(project, {"template.yaml": "# older\nResources: {}\n"})
    for path in OWNED:
        (project / path).write_bytes((project / path).read_bytes().replace(b"\n", b"\r\n"))
    done = awsworld("init", "--upgrade", cwd=project)
    assert done.returncode == 0 and "rewrote template.yaml" in done.stdout, done.stderr
    assert not saved_copies(project) and (project / "template.yaml").read_text() == template_text()


def test_init_force_saves_each_file_it_overwrites_that_differs(tmp_path: Path) -> None:
    """``init --force`` overwrites every file init writes: samconfig.toml with the answers sam deploy --guided
    saved, an edited template, requirements that are not even UTF-8, are saved beside them first; a file as init
    wrote it, or equal to the new one, is not."""
    project = make_project(tmp_path / "shop")
    assert awsworld("init", "-m", "myapp.orders", cwd=project).returncode == 0
    samconfig, template = project / "samconfig.toml", project / "template.yaml"
    samconfig.write_text(samconfig.read_text() + 'region = "eu-west-1"\n')
    template.write_text(template.read_text() + "# mine\n")
    (project / "src" / "requirements.txt").write_bytes(b"requests  # caf\xe9 in Latin-1\n")
    written_by_an_older_awsworld(project, {"infra/monitoring.yaml": "# an older monitoring stack\n"})
    before = files_of(project)
    done = awsworld("init", "-m", "myapp.orders", "--force", cwd=project)
    assert done.returncode == 0, done.stderr
    assert saved_copies(project) == {"samconfig.toml.edited": before["samconfig.toml"],
                                     "src/requirements.txt.edited": before["src/requirements.txt"],
                                     "template.yaml.edited": before["template.yaml"]}, done.stdout
    assert "template.yaml as template.yaml.edited (edited since awsworld 0.0.9 wrote it)" in done.stdout
    assert "samconfig.toml as samconfig.toml.edited (it differed" in done.stdout, done.stdout
    assert {path: text for path, text in files_of(project).items() if not path.endswith(".edited")} == {
        **before, "samconfig.toml": samconfig_text("shop", ["myapp.orders"]).encode(),
        "template.yaml": template_text().encode(), "infra/monitoring.yaml": monitoring_text().encode(),
        "src/requirements.txt": requirements_text().encode(),
        MANIFEST_PATH: (project / MANIFEST_PATH).read_bytes()}
    assert record_of(project) == {"awsworld": __version__, "files": written_digests(project)}


def test_upgrade_without_a_samconfig_prints_the_guided_deploy(tmp_path: Path) -> None:
    """An app whose samconfig.toml is gone (never kept, or deleted) has no saved stack settings: the next steps
    are the first deploy's, ``sam deploy --guided`` and the one answer it needs."""
    project = make_project(tmp_path / "shop")
    assert awsworld("init", "-m", "myapp.orders", cwd=project).returncode == 0
    (project / "samconfig.toml").unlink()
    done = awsworld("init", "--upgrade", cwd=project)
    assert done.returncode == 0, done.stderr
    assert next_steps(done.stdout)[-1] == "sam deploy --guided", done.stdout
    assert GUIDED_WEBHOOK_ANSWER in done.stdout and not (project / "samconfig.toml").exists()


def test_upgrade_keeps_the_functions_architecture_the_user_set(tmp_path: Path) -> None:
    """Deploy's arm64 recipe edits the template's ``Architectures``: an upgrade rewrites the template around it."""
    project = make_project(tmp_path / "shop")
    assert awsworld("init", "-m", "myapp.orders", cwd=project).returncode == 0
    template = project / "template.yaml"
    assert template_text().count("Architectures: [x86_64]") == 1
    template.write_text(template_text().replace("Architectures: [x86_64]", "Architectures: [ arm64 ]"))
    done = awsworld("init", "--upgrade", cwd=project)
    assert done.returncode == 0 and "and your template's Architectures: [arm64]" in done.stdout, done
    assert template.read_text() == template_text().replace("Architectures: [x86_64]", "Architectures: [arm64]")
    assert not saved_copies(project), "the architecture is carried over: no edit lost, none to save"
    again = awsworld("init", "--upgrade", cwd=project)
    assert "nothing to rewrite" in again.stdout and "Architectures: [arm64]" in again.stdout, again
    # An edit beside it is an edit all the same.
    template.write_text(template.read_text().replace("Architectures: [arm64]", "Architectures: [x86_64]") + "# mine\n")
    refused = awsworld("init", "--upgrade", cwd=project)
    assert refused.returncode == 1 and "your edits to template.yaml" in refused.stderr, refused.stderr


@pytest.mark.parametrize(("before", "after"), [
    ("awsworld[local] >= 0.0.1\n", "awsworld[local]=={v}\n"),  # extras kept, any specifier pinned
    ("awsworld", "awsworld=={v}"),  # no newline at the end: none added
    ("requests\nawsworld-extras==1\n", "requests\nawsworld-extras==1\nawsworld=={v}\n"),  # another package: added
    ("requests", "requests\nawsworld=={v}\n"),
    ("# awsworld==0.0.1 (commented out)\n", "# awsworld==0.0.1 (commented out)\nawsworld=={v}\n"),
])
def test_upgrade_pins_the_awsworld_requirement_and_keeps_every_other_character(before: str, after: str) -> None:
    from awsworld.deploy.init import _pinned_requirements  # pyright: ignore[reportPrivateUsage]

    assert _pinned_requirements(before) == after.format(v=__version__)


@pytest.mark.parametrize(("setup", "args", "message"), [
    ("", ["--upgrade"], "no template.yaml in ."),
    ("init", ["--upgrade", "-m", "myapp.orders"], "give no --module with it"),
    ("init record", ["--upgrade"], f"{MANIFEST_PATH} is not JSON"),
    ("init url", ["--upgrade"], "installs awsworld from a URL or path"),
    ("", [], "name your workflow modules"),
    ("", [], "only the World server: awsworld init DIR --world-server"),
    ("init", ["--upgrade", "--world-server"], "give no --world-server with it"),
])
def test_upgrade_and_init_refuse_in_one_line_and_write_nothing(tmp_path: Path, setup: str, args: list[str],
                                                               message: str) -> None:
    project = make_project(tmp_path / "shop")
    if "init" in setup:
        assert awsworld("init", "-m", "myapp.orders", cwd=project).returncode == 0
        (project / "template.yaml").write_text("# older\n")
    if "record" in setup:
        (project / MANIFEST_PATH).write_text("{\n")
    if "url" in setup:
        (project / "src" / "requirements.txt").write_text("awsworld @ file:///wheels/awsworld-0.0.1-py3-none-any.whl\n")
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    done = awsworld("init", *args, cwd=project)
    assert done.returncode in (1, 2) and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(("existing", "added"), [
    ("node_modules\n.aws-sam\n/dist/\n", [".awsworld/"]),  # other spellings of the same entries count
    ("*.log", [".awsworld/", ".aws-sam/", "dist/"]),  # no newline at the end: the user's line stays whole
    (".awsworld/\n.aws-sam/\ndist/\n", []),
])
def test_init_adds_what_gitignore_lacks_and_keeps_every_line_it_has(tmp_path: Path, existing: str,
                                                                    added: list[str]) -> None:
    """``.awsworld/`` holds dev state with payloads, ``.aws-sam/`` the built artifact, ``dist/`` the wheel of the
    build route: init adds the ones a project's .gitignore lacks, after its lines, and never rewrites them; run
    again (--force), it adds nothing."""
    project = make_project(tmp_path / "shop")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / ".gitignore").write_text(existing)
    done = awsworld("init", "-m", "myapp.orders", cwd=project)
    assert done.returncode == 0, done.stderr
    text = (project / ".gitignore").read_text()
    assert text.startswith(existing), "the user's lines come first, unchanged"
    assert [line for line in text[len(existing):].splitlines() if line and not line.startswith("#")] == added
    assert (f".gitignore: added {' '.join(added)}" in done.stdout) == bool(added), done.stdout
    again = awsworld("init", "-m", "myapp.orders", "--force", cwd=project)
    assert again.returncode == 0 and ".gitignore" not in again.stdout
    assert (project / ".gitignore").read_text() == text
    ignored = subprocess.run(["git", "check-ignore", "--no-index", ".awsworld/table.json", ".aws-sam/build",
                              "dist/awsworld.whl"], cwd=project, capture_output=True, text=True, check=False)
    assert ignored.stdout.split() == [".awsworld/table.json", ".aws-sam/build", "dist/awsworld.whl"], ignored


@pytest.mark.parametrize("module", ["myapp.orders", "orders"])
def test_init_refuses_a_module_at_the_root_and_names_the_move(tmp_path: Path, module: str) -> None:
    """A module at the project's root would make sam build pack the root whole: init writes nothing and says
    which move fixes it; after that move, init succeeds."""
    project = tmp_path / "shop"
    if module == "orders":
        project.mkdir()
        (project / "orders.py").write_text(ORDERS)
    else:
        make_project(project, code="")
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    refused = awsworld("init", "-m", module, cwd=project)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"{module} is at the project's root" in refused.stderr and "Traceback" not in refused.stderr
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before, "nothing written"
    move = re.search(r"\((mkdir -p src && mv \S+ src/)\)", refused.stderr)
    assert move is not None, refused.stderr
    subprocess.run(["bash", "-c", move.group(1)], cwd=project, check=True)
    done = awsworld("init", "-m", module, cwd=project)
    assert done.returncode == 0 and not done.stderr, done.stderr


@pytest.mark.parametrize(("direct_url", "source"), [
    (None, None),  # from a package index: sam build's pip finds the same version there
    ({"url": "file:///home/me/awsworld", "dir_info": {"editable": True}}, "/home/me/awsworld"),
    ({"url": "file:///tmp/w/awsworld-1.0-py3-none-any.whl", "archive_info": {}},
     "/tmp/w/awsworld-1.0-py3-none-any.whl"),
    ({"url": "https://github.com/o/awsworld.git", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
     "git+https://github.com/o/awsworld.git@abc123"),
])
def test_the_build_route_follows_where_awsworld_was_installed_from(
        direct_url: dict[str, object] | None, source: str | None) -> None:
    from awsworld.deploy.init import build_route

    commands = [line for line in build_route(direct_url, "/venv/bin/python") if not line.startswith("#")]
    if source is None:
        assert commands == ["sam build", "sam deploy --guided"]
    else:
        assert commands == [f"/venv/bin/python -m pip wheel --no-deps --wheel-dir dist {source}",
                            "PIP_FIND_LINKS=dist sam build", "sam deploy --guided"]
    updating = [line for line in build_route(direct_url, "/venv/bin/python", update=True) if not line.startswith("#")]
    assert updating == [*commands[:-1], "sam deploy"], "an update deploys with the saved samconfig.toml"


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
sys.path.append(sys.argv[2])  # the runtime's boto3/botocore, after the function's code (as /var/runtime)
import flow, webhook
from awsworld.lambda_host.container import import_modules
from awsworld.authoring.definitions import REGISTRY
import_modules(sys.argv[1])
assert "orders.place" in REGISTRY.workflows, sorted(REGISTRY.workflows)
assert REGISTRY.workflows["orders.place"].fn.__module__ == "myapp.orders"
assert "myapp.orders.reserve" in REGISTRY.steps, sorted(REGISTRY.steps)
assert flow.handler.__module__ == "awsworld.lambda_host.flow"
assert webhook.handler.__module__ == "awsworld.lambda_host.webhook"
print("built function imports", sys.argv[1])
"""


SERVER_CHECK = """
import sys
sys.path.insert(0, ".")
sys.path.append(sys.argv[1])
import serve, mangum, starlette, awsworld._http.app  # (the handler imports them on its first request)
assert serve.handler.__module__ == "awsworld.lambda_host.serve"
print("the World server imports")
"""


# What a real project holds beside its code: none of it may reach the Lambda artifact.
CLUTTER = {
    ".awsworld/table.json": "{}",  # awsworld dev --state: a copy of the local table, with user payloads
    "tests/test_orders.py": "def test_place() -> None: ...\n",
    ".venv/pyvenv.cfg": "home = /usr/bin\n",
    "venv/pyvenv.cfg": "home = /usr/bin\n",
    ".env": "API_KEY=secret\n",
    ".env.local": "API_KEY=secret\n",
    ".env.production": "API_KEY=secret\n",
    "app.log": "a log line\n",
    "logs/dev.log": "a log line\n",
}
USER_CODE = {"myapp", "flow.py", "webhook.py", "serve.py", "requirements.txt"}  # src/'s entries




def guided_deploy(project: Path, answers: str, tmp_path: Path) -> str:
    """What ``sam deploy --guided`` prints in ``project`` given ``answers`` on its stdin, with no AWS account:
    its questions come before its first request, which goes to a closed port and fails at once."""
    env = {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(SAM_CLI_TELEMETRY="0", AWS_DEFAULT_REGION="eu-west-1", AWS_ACCESS_KEY_ID="none",
               AWS_SECRET_ACCESS_KEY="none", AWS_EC2_METADATA_DISABLED="true", AWS_ENDPOINT_URL="http://127.0.0.1:9",
               HOME=str(tmp_path))
    done = subprocess.run([str(SAM_TOOLS / "sam"), "deploy", "--guided"], cwd=project, env=env, input=answers,
                          capture_output=True, text=True, timeout=120, check=False)
    return done.stdout + done.stderr


@pytest.mark.sam
def test_sam_deploy_guided_takes_every_default_but_the_webhook_question_whose_answer_init_prints(
        tmp_path: Path) -> None:
    """A new user presses Enter through ``sam deploy --guided``: every default is init's samconfig.toml's, but the
    webhook function's public URL (``AuthType: NONE``, by design) gets SAM's ``Is this okay? [y/N]``, whose N stops
    the deploy. Init's next steps name that question and the answer, as SAM prints it; answered, the deploy
    goes on to save its settings and reach AWS."""
    if not (SAM_TOOLS / "sam").exists():
        pytest.skip(f"the SAM tools venv is missing ({SAM_TOOLS.parent}: .ci/run creates it)")
    project = make_project(tmp_path / "shop")
    done = awsworld("init", str(project), "--module", "myapp.orders", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (answer,) = re.findall(r'# to "(.+)" answer y$', done.stdout, re.MULTILINE)
    samconfig = (project / "samconfig.toml").read_text()

    defaults = guided_deploy(project, "\n" * 60, tmp_path)
    assert f"{answer} [y/N]: Error: Security Constraints Not Satisfied!" in defaults, defaults[-2000:]
    # Stack name, region, each parameter, then three yes/no questions come before it.
    before = 2 + len(load(str(project / "template.yaml"))["Parameters"]) + 3
    answered = guided_deploy(project, "\n" * before + "y\n" + "\n" * 20, tmp_path)
    assert "Security Constraints Not Satisfied" not in answered, answered[-2000:]
    assert f"{answer} [y/N]: \tSave arguments to configuration file" in answered, answered[-2000:]
    assert "Could not connect to the endpoint URL" in answered, answered[-2000:]
    assert (project / "samconfig.toml").read_text() == samconfig, "nothing deployed, nothing saved"


def installed_entries(built: Path) -> set[str]:
    """The top-level entries the installed distributions own: each ``*.dist-info`` folder and every top-level
    name its RECORD lists (packages, modules, ``.data`` folders, extension modules)."""
    owned: set[str] = set()
    for info in built.glob("*.dist-info"):
        owned.add(info.name)
        for line in (info / "RECORD").read_text().splitlines():
            top = line.split(",", 1)[0].split("/", 1)[0]
            if top and top != "..":
                owned.add(top)
    return owned


@pytest.mark.sam
@pytest.mark.timeout(600)  # about a minute alone; several on a loaded machine
def test_an_initialised_project_lints_builds_and_imports_its_workflows(tmp_path: Path) -> None:
    if not (SAM_TOOLS / "sam").exists():
        pytest.skip(f"the SAM tools venv is missing ({SAM_TOOLS.parent}: .ci/run creates it)")
    cold_start = cold_start_bench()
    try:
        python313 = cold_start.find_python("3.13")
    except SystemExit:
        pytest.skip("sam build needs python3.13 (the functions' runtime): none on PATH nor in pyenv")
    runtime_sdk = cold_start.runtime_sdk(python313, tmp_path / "runtime-sdk")
    project = make_project(tmp_path / "shop")
    for path, text in CLUTTER.items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(text)
    done = awsworld("init", str(project), "--module", "myapp.orders", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # The World server as docs/how-to/world-over-http.md turns it on in an app init wrote: else its function's
    # artifact is a placeholder (tests/deploy/test_build.py), and this test imports the built World server.
    assert (project / MANIFEST_PATH).is_file(), "the record is written, and below, in no artifact"
    samconfig = project / "samconfig.toml"
    samconfig.write_text(samconfig.read_text().replace('Modules=\\"myapp.orders\\"',
                                                       'Modules=\\"myapp.orders\\" WorldServer=\\"true\\"', 1))
    assert 'WorldServer=\\"true\\"' in samconfig.read_text()

    # The next steps init printed, as a user pastes them (all but the deploy): awsworld is not on PyPI, so they
    # build its wheel from where this awsworld was installed (this checkout) and point sam build's pip at it.
    steps = next_steps(done.stdout)
    assert steps[-1] == "sam deploy --guided" and any("sam build" in step for step in steps), steps
    script = "set -e\n" + "\n".join(steps[:-1]) + "\n"
    # The user's machine: Python 3.11 on PATH and no 3.13 there (SAM's own Python builder refused to build),
    # sam and uv installed (uv's route; tests/deploy/test_build.py takes pip's).
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "sam").symlink_to(SAM_TOOLS / "sam")
    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        pytest.skip(f"uv is not installed beside {sys.executable} (.ci/run installs it into .venv)")
    (tools / "uv").symlink_to(uv)
    env = {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(SAM_CLI_TELEMETRY="0", AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1",
               PATH=path_without_python313(tools))
    env.update(python313_env(python313))

    # The wheel and sam build (about 50 s, mostly pip fetching the functions' dependencies) run while the
    # linters do.
    with subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as sam_build:
        try:
            run([str(SAM_TOOLS / "cfn-lint"), "template.yaml", "infra/monitoring.yaml"], project, env)
            run([str(SAM_TOOLS / "sam"), "validate", "--lint"], project, env)
            output_of_build, _ = sam_build.communicate(timeout=400)
        finally:
            if sam_build.poll() is None:
                sam_build.kill()
    assert sam_build.returncode == 0, f"the next steps failed:\n{script}\n{output_of_build[-4000:]}"
    assert output_of_build.count("with uv for CPython 3.13 x86_64;") == 3, output_of_build[-4000:]

    overrides = tomllib.loads((project / "samconfig.toml").read_text())["default"]["deploy"]["parameters"]
    modules = dict(re.findall(r'(\w+)="([^"]*)"', overrides["parameter_overrides"]))["Modules"]
    for function in ("FlowFunction", "WebhookFunction"):
        built = project / ".aws-sam" / "build" / function
        entries = {entry.name for entry in built.iterdir()}
        planted = {path.split("/")[0] for path in CLUTTER}
        assert not entries & planted, f"dev state, tests, envs, env files or logs were packed: {entries & planted}"
        assert entries >= USER_CODE and "awsworld" in entries, sorted(entries)
        # The build drops the console scripts (bin/) the RECORD files list, and adds the entry points' bytecode
        # and the digest of the deploy configuration (which holds no value of it).
        assert entries == USER_CODE | (installed_entries(built) - {"bin"}) | {"__pycache__", CONFIGURATION_STAMP}, \
            f"neither the user's code nor an installed distribution's: {sorted(entries - installed_entries(built))}"
        assert (built / "myapp" / "orders.py").read_text() == ORDERS, "the user's code is in the function"
        compiled = {path.name for path in built.rglob("*.cpython-313.pyc")}
        assert {"orders.cpython-313.pyc", "flow.cpython-313.pyc", "client.cpython-313.pyc"} <= compiled, \
            "the build compiles the user's code, the entry points and awsworld for the runtime's Python"
        # -I -S: only the built code and the standard library (no PYTHONPATH, no site-packages).
        assert not {"boto3", "botocore", "aiohttp"} & entries, "the runtime provides the SDK: none is bundled"
        output = run([python313, "-I", "-S", "-c", BUILT_FUNCTION_CHECK, modules, str(runtime_sdk)], built, env,
                     timeout=60)
        assert "built function imports myapp.orders" in output
        assert ("httpx" in entries) == (function == "FlowFunction"), "the flow function POSTs pushed deliveries"
        assert "mangum" not in entries and "starlette" not in entries, "the World server's packages stay in it"
    # src/requirements.txt says awsworld==VERSION, without [serve]: the World server's build adds the extra.
    assert "added awsworld's 'serve' extra:" in output_of_build, output_of_build[-4000:]
    server = project / ".aws-sam" / "build" / "WorldServerFunction"
    output = run([python313, "-I", "-S", "-c", SERVER_CHECK, str(runtime_sdk)], server, env, timeout=60)
    assert "the World server imports" in output


@pytest.mark.parametrize("name", ["template.yaml", "src/requirements.txt"])
def test_upgrade_refuses_a_file_that_is_not_utf8_with_a_message_not_a_traceback(tmp_path: Path, name: str) -> None:
    """An editor's legacy encoding (Latin-1 "é" in a comment) in a file ``--upgrade`` reads as text: said, with the
    byte and the fix, and nothing written (every file's bytes as they were)."""
    project = make_project(tmp_path / "app")
    assert awsworld("init", "-m", "myapp.orders", cwd=project).returncode == 0
    target = project / name
    target.write_bytes(target.read_bytes() + "# café\n".encode("latin-1"))
    before = {path: path.read_bytes() for path in project.rglob("*") if path.is_file()}
    refused = awsworld("init", "--upgrade", cwd=project)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert f"{name} is not UTF-8 text (byte " in refused.stderr and "nothing was written" in refused.stderr
    assert {path: path.read_bytes() for path in project.rglob("*") if path.is_file()} == before
