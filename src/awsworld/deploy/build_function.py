"""How ``sam build`` builds the functions: ``infra/Makefile`` runs this file for each of them.

SAM's own Python builder needs the runtime's interpreter (``python3.13``) on ``PATH`` and fails with "Binary
validation failed" without it, and it leaves no bytecode in the artifact: Lambda's ``/var/task`` is read-only,
so every cold start then compiles every module it imports (the flow handler's import took 0.56 s as built and
0.24 s compiled). The template builds each function with ``BuildMethod: makefile`` instead, and this script does
the build with whatever Python runs it (3.9 or newer, standard library only):

1. installs ``requirements.txt`` into the artifact for the functions' runtime, not for this interpreter:
   wheels for CPython 3.13 on Linux (manylinux up to glibc 2.34, Lambda's Amazon Linux 2023) and the template's
   architecture (``--architecture``, ``x86_64`` or ``arm64``: no Docker needed for either). With ``uv`` (on
   ``PATH``, or importable by this Python) it runs ``uv pip install --python-version 3.13 --python-platform
   ... --target``; else pip's ``--platform/--python-version/--only-binary=:all:`` does the same. Relative paths
   in the requirements and ``PIP_FIND_LINKS`` resolve against the project's root (the folder above ``infra/``,
   where ``template.yaml`` is), as they did under SAM's pip;
   with ``--extra serve`` (the Makefile's World server target), then the packages the installed awsworld's
   metadata lists for that extra (its ``Requires-Dist: ...; extra == "serve"`` lines: mangum and Starlette, which
   ``awsworld.lambda_host.serve`` imports), so the World server runs whether or not the requirements say
   ``awsworld[serve]``, with the versions of the awsworld that was installed; ``--only httpx`` (the flow function's
   target) takes just that one of them, which the flow function's pushed deliveries (``awsworld._http.push``) POST
   with. They install the same way, for the same platform, constrained to what is already in the artifact;
2. copies the code folder (the template's ``CodeUri``, which SAM copied into the folder ``make`` runs in) over
   it, leaving out what SAM's Python builder leaves out (``__pycache__``, ``.venv``, ``.env``, ...), ``awsworld
   dev``'s state and the copies ``awsworld init`` saved of files it overwrote (``*.edited``);
3. compiles the artifact's bytecode with a Python 3.13 (``.pyc`` files are specific to one minor version, so no
   other interpreter can write them): ``$PYTHON313``, else ``python3.13`` on ``PATH``, else one uv knows
   (``uv python find 3.13``), else pyenv's (``$(pyenv root)/versions/3.13.*``), else one uv installs (``uv python
   install 3.13``). ``unchecked-hash`` ``.pyc`` files stay valid whatever times the deployment zip records, and
   they name their sources under ``/var/task``, where Lambda puts them, not under the folder the build ran in.
   Without any 3.13 the build still succeeds (the artifact runs; its cold starts compile) and says so, with
   what to install;
4. writes the digest of the project's deploy configuration (``template.yaml``, ``samconfig.toml``) into the
   artifact, so that a change of parameters alone still publishes a new version (``stamp_deploy_configuration``).

``--switched-by WorldServer`` (the World server's target) builds nothing of the kind when no ``samconfig`` of the
project turns that parameter on: ``sam build`` builds every function of the template, a ``Condition: false``
one too, and the World server's ~48 MB (17 MB zipped) were built, compiled and uploaded by every deploy of a
stack that has none. Then the artifact is a placeholder entry point whose import fails saying how to build the
real one (``write_placeholder``).

The packaged copy (``awsworld/deploy/build_function.py``) is the one edited; ``awsworld init`` writes it to
``infra/build_function.py`` and ``tests/deploy/test_init.py`` keeps the repository's copy equal to it.
"""

from __future__ import annotations

import argparse
import contextlib
import email.parser
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

#: The functions' runtime (the template's ``Runtime: python3.13``).
RUNTIME_VERSION = "3.13"
#: The newest glibc of Lambda's python3.13 image (Amazon Linux 2023): wheels up to manylinux_2_34 run there.
GLIBC = "2_34"
#: Lambda's architectures -> the CPU names of wheel tags.
MACHINES = {"x86_64": "x86_64", "arm64": "aarch64"}
#: What SAM's Python builder leaves out of a function's code (aws_lambda_builders' PythonPipWorkflow).
EXCLUDED = (".aws-sam", ".chalice", ".git", ".gitignore", "*.pyc", "__pycache__", "*.so", ".Python", "*.egg-info",
            "*.egg", "pip-log.txt", "pip-delete-this-directory.txt", "htmlcov", ".tox", ".nox", ".coverage",
            ".cache", ".pytest_cache", ".python-version", ".mypy_cache", ".dmypy.json", ".pyre", ".env", ".venv",
            "venv", "venv.bak", "env.bak", "ENV", "env", ".vscode", ".idea")
#: A folder of ``awsworld dev --state`` (``cli/dev_state.py``: ``STATE_FILE`` with ``LOCK_FILE`` or ``TABLE_FILE``),
#: whatever its name: it holds the runs' payloads in the clear, and is left out of every artifact (``copy_code``).
DEV_STATE_FILE = "state.json"
DEV_STATE_BESIDE = ("dev.lock", "table.jsonl")
#: The suffix of the copies ``awsworld init --force`` and ``init --upgrade`` save of a project's file before they
#: overwrite it (``flow.py.edited``, ``flow.py.2.edited``: ``awsworld/deploy/manifest.py``): the user's edits, to
#: read and carry over, never a function's code, so the build leaves them out (``copy_code``).
SAVED_COPY_SUFFIX = ".edited"
PREFIX = "awsworld build:"
#: Where Lambda unpacks a function's code (its ``LAMBDA_TASK_ROOT``): the path the bytecode names its sources by.
LAMBDA_TASK_ROOT = "/var/task"
#: What deploys the functions beside their code, in the project's root: a change to one of these alone must
#: still publish a new version of each function (``stamp_deploy_configuration``).
DEPLOY_CONFIGURATION = ("template.yaml", "samconfig.toml", "samconfig.yaml", "samconfig.yml")
#: The artifact's file holding their digest (``sha256sum``'s format).
CONFIGURATION_STAMP = "awsworld-deploy-configuration.sha256"


#: How a samconfig file turns a parameter on, in its ``parameter_overrides`` (``Name=true``, ``Name="true"``, or
#: ``Name=\\"true\\"`` inside a TOML string, as ``awsworld init`` and ``sam deploy --guided`` write them).
_SWITCHED_ON = r"""(?<![\w-]){}\s*=\s*\\?["']?true\\?["']?(?![\w-])"""


class BuildError(Exception):
    """A step of the build failed: the message says which and what to do."""


def say(text: str) -> None:
    print(f"{PREFIX} {text}", flush=True)


def uv_command() -> list[str] | None:
    """How to run uv: the ``uv`` on PATH, else the one installed into this Python (``pip install uv``)."""
    found = shutil.which("uv")
    if found:
        return [found]
    if importlib.util.find_spec("uv") is not None:
        return [sys.executable, "-m", "uv"]
    return None


def find_links() -> list[str]:
    """The extra wheel folders pip would read from ``PIP_FIND_LINKS`` (uv reads only its own variables)."""
    return os.environ.get("PIP_FIND_LINKS", "").split()


def install_command(requirements: Path, target: Path, architecture: str, uv: list[str] | None,
                    constraints: Path | None = None) -> list[str]:
    """The install of ``requirements`` into ``target`` for CPython 3.13 on Lambda's Linux and ``architecture``;
    ``constraints``: an install that adds to the artifact (an extra's packages) without moving what is there."""
    machine = MACHINES[architecture]
    # (pip's --target does not see what the folder holds: --upgrade lets it replace a shared dependency with the
    # same version, the constraints pin, rather than leave a second copy's metadata beside the first.)
    added = [] if constraints is None else ["-c", str(constraints), *([] if uv is not None else ["--upgrade"])]
    if uv is not None:
        # --refresh: a local source (this repository's ".", a rebuilt wheel of the same version in dist/) is
        # rebuilt, never taken from uv's cache as it was; --link-mode copy: the artifact shares no file with it.
        command = [*uv, "pip", "install", "--quiet", "--refresh", "--link-mode", "copy", "--target", str(target),
                   "--python-version", RUNTIME_VERSION, "--python-platform", f"{machine}-manylinux_{GLIBC}"]
        for link in find_links():
            command += ["--find-links", link]
        return [*command, *added, "-r", str(requirements)]
    platforms = [f"manylinux_{glibc}_{machine}" for glibc in (GLIBC, "2_28", "2_17")] + [f"manylinux2014_{machine}"]
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--disable-pip-version-check",
               "--target", str(target), "--implementation", "cp", "--python-version", RUNTIME_VERSION,
               "--only-binary=:all:"]
    for platform in platforms:
        command += ["--platform", platform]
    return [*command, *added, "-r", str(requirements)]


#: The lock that lets one install per project run at a time (``one_install_at_a_time``), in the project's own folder.
LOCK_FILE = (".aws-sam", "awsworld-build.lock")


@contextlib.contextmanager
def one_install_at_a_time(project: Path) -> Iterator[None]:
    """SAM builds each makefile function on its own, in parallel (samconfig's ``parallel = true``): two builds of
    one local source (this repository's ".") at once collide in its ``build/`` folder. One install per project
    at a time, by a lock file in the project's own ``.aws-sam/`` (SAM's build folder, which ``awsworld init``'s
    .gitignore lists), opened 0600 and never through a symlink (where ``fcntl`` exists: not on Windows).

    Why there: the lock was a name anyone could predict in the shared temporary folder
    (``/tmp/awsworld-build-<digest of the project's path>.lock``), so another local user could make it first: a
    symlink, which the build followed and truncated whatever it named, or a file they kept locked, and every
    ``sam build`` of the project waited for good. Others cannot create a file in the user's project, nor open a
    0600 one to lock it."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    path = project.joinpath(*LOCK_FILE)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        lock = os.open(path, flags, 0o600)
    except OSError as error:
        raise BuildError(f"the build's lock {path} cannot be opened ({error.strerror or error}): the project "
                         "folder must be writable by the build, and the lock a plain file (remove it if it is a "
                         "symlink)") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lock)  # (releases the lock)


def run_install(command: list[str], project: Path, what: str, architecture: str) -> None:
    with one_install_at_a_time(project):
        done = subprocess.run(command, cwd=project)
    if done.returncode:
        raise BuildError(f"installing {what} for CPython {RUNTIME_VERSION} ({architecture}) failed: the "
                         "installer's message above says why (the package index unreachable, say, or a "
                         "dependency that has no wheel for that platform: only a build in Lambda's own image, "
                         "sam build --use-container, can compile one)")


def install(code: Path, target: Path, architecture: str, project: Path, extra: str | None = None,
            only: Sequence[str] = ()) -> str:
    requirements = code / "requirements.txt"
    if not requirements.is_file():
        if extra is not None:
            say(f"WARNING: no requirements.txt in {code}, so no awsworld and nothing of its {extra!r} extra: "
                "add one with awsworld==VERSION (awsworld init writes it)")
        return "no requirements.txt: nothing installed"
    uv = uv_command()
    if uv is None and subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode:
        raise BuildError(f"neither uv nor pip is available to {sys.executable}: install uv "
                         "(https://docs.astral.sh/uv/) or pip for it, or run sam build with PYTHON=<a Python "
                         "that has pip> (make reads it)")
    run_install(install_command(requirements, target, architecture, uv), project, requirements.name, architecture)
    done = f"installed {requirements.name} with {'uv' if uv else 'pip'} for CPython {RUNTIME_VERSION} {architecture}"
    if extra is not None:
        added = install_extra(target, architecture, project, uv, extra, only)
        done += f"; {added}" if added else ""
    # Console scripts are of no use in a function (their first lines name this machine's interpreter), nor is
    # the lock file uv leaves in a --target folder.
    shutil.rmtree(target / "bin", ignore_errors=True)
    if uv is not None:
        (target / ".lock").unlink(missing_ok=True)
    return done


def normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``Typing_Extensions`` -> ``typing-extensions``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(target: Path) -> dict[str, tuple[str, str]]:
    """What the artifact holds: normalized name -> (name, version), from each ``*.dist-info/METADATA``."""
    found: dict[str, tuple[str, str]] = {}
    for metadata in target.glob("*.dist-info/METADATA"):
        headers = email.parser.Parser().parsestr(metadata.read_text(encoding="utf-8"), headersonly=True)
        name, version = headers.get("Name"), headers.get("Version")
        if name and version:
            found[normalized(name)] = (name, version)
    return found


_EXTRA_MARKER = r"""extra\s*==\s*(['"]){}\1"""


def extra_requirements(metadata: str, extra: str) -> list[str]:
    """The requirements ``metadata`` (a distribution's METADATA) lists for ``extra``, each without its
    ``extra == "..."`` clause. A clause beside it (``python_version < "3.12"``; awsworld's extras have none) stays
    for the installer: uv evaluates it for the runtime's Python, pip for the Python that runs this build."""
    marker = re.compile(_EXTRA_MARKER.format(re.escape(normalized(extra))))
    requirements = []
    for value in email.parser.Parser().parsestr(metadata, headersonly=True).get_all("Requires-Dist") or []:
        requirement, _, condition = str(value).partition(";")
        found = marker.search(condition)
        if found is None:
            continue
        rest = re.sub(r"^and\s+|\s+and$", "", f"{condition[:found.start()]} {condition[found.end():]}".strip())
        if re.search(r"\bor\b|\(", rest):
            raise BuildError(f"the {extra!r} extra's requirement {str(value).strip()!r} has a marker this build "
                             "does not read: add the package to requirements.txt yourself")
        requirements.append(requirement.strip() + (f"; {rest}" if rest else ""))
    return requirements


def install_extra(target: Path, architecture: str, project: Path, uv: list[str] | None, extra: str,
                  only: Sequence[str]) -> str | None:
    """Install into ``target`` the packages the installed awsworld lists for ``extra`` (``only``: just these of
    them), pinned by constraints to what ``target`` holds; what it added, as the build says it (None: no awsworld
    was installed, which the build warns about and leaves to whoever wrote the requirements)."""
    before = installed(target)
    metadata = [path for path in target.glob("*.dist-info/METADATA") if normalized(path.parent.name.split("-")[0])
                == "awsworld"]
    if not metadata:
        say(f"WARNING: requirements.txt installed no awsworld, so nothing of its {extra!r} extra "
            f"({', '.join(only) or 'all of it'}) was added: this function needs awsworld (awsworld init writes "
            "awsworld==VERSION into requirements.txt)")
        return None
    wanted = extra_requirements(metadata[0].read_text(encoding="utf-8"), extra)
    names = {normalized(re.split(r"[\s\[<>=!~;@(]", line, maxsplit=1)[0]): line for line in wanted}
    unknown = sorted({normalized(name) for name in only} - set(names))
    if unknown:
        raise BuildError(f"awsworld's {extra!r} extra lists no {', '.join(unknown)} (it lists "
                         f"{', '.join(sorted(names)) or 'nothing'}): the Makefile's --only names what it needs")
    if only:
        wanted = [names[normalized(name)] for name in only]
    if not wanted:
        return f"awsworld's {extra!r} extra lists no packages"
    with tempfile.TemporaryDirectory(prefix="awsworld-build-") as scratch:
        requirements, constraints = Path(scratch, "extra.txt"), Path(scratch, "constraints.txt")
        requirements.write_text("".join(f"{line}\n" for line in wanted), encoding="utf-8")
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in before.values()
                                       if normalized(name) != "awsworld"), encoding="utf-8")
        run_install(install_command(requirements, target, architecture, uv, constraints), project,
                    f"awsworld's {extra!r} extra ({', '.join(wanted)})", architecture)
    after = installed(target)
    added = sorted(f"{name} {version}" for key, (name, version) in after.items() if key not in before)
    subset = f"{', '.join(only)} of " if only else ""
    return (f"added {subset}awsworld's {extra!r} extra: {', '.join(added)}" if added
            else f"{subset}awsworld's {extra!r} extra was already installed")


def copy_code(code: Path, target: Path) -> None:
    """The function's own code over what was installed (as SAM's builder copies it: after the dependencies),
    without ``awsworld dev``'s state: ``awsworld dev --state .awsworld`` run from ``src/`` put it in the CodeUri,
    and every run's arguments, results and payloads would have shipped in the artifact; nor the copies init saved
    of a file it overwrote (``SAVED_COPY_SUFFIX``)."""
    shutil.copytree(code, target, ignore=_left_out, dirs_exist_ok=True)


def _left_out(folder: str, names: list[str]) -> set[str]:
    left = set(shutil.ignore_patterns(*EXCLUDED)(folder, names))
    for name in names:
        path = Path(folder) / name
        if (path / DEV_STATE_FILE).is_file() and any((path / beside).is_file() for beside in DEV_STATE_BESIDE):
            say(f"left out {path}: awsworld dev's state (its runs' payloads) is no part of a function")
            left.add(name)
        elif name.endswith(SAVED_COPY_SUFFIX) and path.is_file():
            say(f"left out {path}: a copy awsworld init saved before it overwrote the file is no part of a function")
            left.add(name)
    return left


def stamp_deploy_configuration(project: Path, target: Path) -> str:
    """Write the digest of the project's ``template.yaml`` and ``samconfig.toml`` into the artifact.

    Why: every deployment publishes a version behind the ``live`` alias, which the queue's event source and the
    webhook URL invoke, and SAM publishes one only when its hash of the function changes. That hash covers the
    code's S3 location (the zip's MD5, and this build is reproducible) and the function's ``Environment`` and
    ``MemorySize`` as the template writes them: ``!Ref LogLevel``, not the parameter's value (SAM issue 1640).
    So ``sam build && sam deploy`` after a change of ``parameter_overrides`` alone (``LogLevel=DEBUG``,
    ``PayloadKmsKeyArn``, ``Modules``, ``FlowMemorySize``) updated the unpublished function and left every
    delivery on the old version with the old values, while the deploy reported success. With the digest in it,
    the zip changes with those files, and with it the version. Only the digest is written: no parameter's value
    leaves the project. A change SAM does see publishes a version with or without it."""
    lines = [f"{hashlib.sha256((project / name).read_bytes()).hexdigest()}  {name}\n"
             for name in DEPLOY_CONFIGURATION if (project / name).is_file()]
    (target / CONFIGURATION_STAMP).write_text("".join(lines), encoding="utf-8")
    return f"stamped {', '.join(line.split()[1] for line in lines) or 'no deploy configuration'}"


def switched_on(project: Path, parameter: str) -> bool:
    """Whether a samconfig file of ``project`` sets ``parameter`` to true, in any config environment (the build
    cannot know which one ``sam deploy --config-env`` will take, so one that turns it on builds it for all)."""
    pattern = re.compile(_SWITCHED_ON.format(re.escape(parameter)))
    return any(pattern.search((project / name).read_text(encoding="utf-8"))
               for name in DEPLOY_CONFIGURATION if name.startswith("samconfig") and (project / name).is_file())


def write_placeholder(target: Path, entry_point: str, parameter: str) -> str:
    """The artifact of a function its parameter leaves out of the stack: only ``entry_point``.py, whose import
    fails with what to do. Its template ``Condition`` keeps it from being deployed; if a deploy turns it on
    anyway (``--parameter-overrides`` on the command line, which the build never sees), the function fails on
    its first start, naming the fix, instead of serving nothing."""
    message = (f"this function was built as a placeholder: no samconfig file of the project set {parameter}=true "
               f"when sam build ran. Add {parameter}=\\\"true\\\" to parameter_overrides in samconfig.toml, then sam "
               "build && sam deploy")
    (target / f"{entry_point}.py").write_text(
        f'"""Placeholder of awsworld\'s build (infra/build_function.py, write_placeholder)."""\n\n'
        f"raise RuntimeError({message!r})\n", encoding="utf-8")
    return f"{parameter} is not true in samconfig.toml: a placeholder {entry_point}.py, nothing installed"


def is_runtime_python(python: str | None) -> bool:
    if not python:
        return False
    check = f"import sys; sys.exit(sys.version_info[:2] != {tuple(map(int, RUNTIME_VERSION.split('.')))})"
    try:
        return subprocess.run([python, "-c", check], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def uv_python(uv: list[str] | None, action: str) -> str | None:
    """``uv python find 3.13`` (action "find") or, after ``uv python install 3.13``, the one it installed."""
    if uv is None:
        return None
    if action == "install":
        say(f"no Python {RUNTIME_VERSION} here: uv installs one for the bytecode (once; uv python install)")
        if subprocess.run([*uv, "python", "install", RUNTIME_VERSION], capture_output=True).returncode:
            return None
    found = subprocess.run([*uv, "python", "find", RUNTIME_VERSION], capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else None


def pyenv_python() -> str | None:
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates = sorted(Path(root).glob(f"versions/{RUNTIME_VERSION}.*/bin/python{RUNTIME_VERSION}"),
                        key=lambda path: [int(part) if part.isdigit() else -1
                                          for part in path.parts[-3].split(".")], reverse=True)
    return next((str(path) for path in candidates if is_runtime_python(str(path))), None)


def runtime_python() -> str | None:
    """A Python 3.13 to compile with, from the places the module docstring lists, in that order."""
    uv = uv_command()
    finders = (lambda: os.environ.get("PYTHON313"), lambda: shutil.which(f"python{RUNTIME_VERSION}"),
               lambda: uv_python(uv, "find"), pyenv_python, lambda: uv_python(uv, "install"))
    for finder in finders:
        python = finder()
        if is_runtime_python(python):
            return python
    return None


def compile_bytecode(target: Path) -> str:
    python = runtime_python()
    if python is None:
        say(f"WARNING: no Python {RUNTIME_VERSION} found, so the function ships without bytecode and each cold "
            f"start compiles what it imports (about twice the import time). .pyc files are specific to one "
            f"Python version: install Python {RUNTIME_VERSION} (uv python install {RUNTIME_VERSION}, pyenv "
            f"install {RUNTIME_VERSION}, or python.org) or set PYTHON313 to one, then sam build again.")
        return "no bytecode"
    # -s/-p: each .pyc names its source where Lambda puts it (/var/task/...), not where this build ran, so the
    # artifact carries no path of the builder's machine (a home folder, a user name) and the same code builds
    # the same bytes in any folder: no version published for a build that only moved (stamp_deploy_configuration).
    done = subprocess.run([python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
                           "-s", str(target), "-p", LAMBDA_TASK_ROOT, str(target)], capture_output=True, text=True)
    if done.returncode:  # a file that is not Python 3.13 (a dependency's template, say): the rest is compiled
        say(f"WARNING: some files did not compile with {python} (they fail if imported):\n"
            f"{(done.stdout + done.stderr).strip()[-3000:]}")
    count = sum(1 for _ in target.rglob("*.pyc"))
    return f"{count} modules compiled with {python}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build one function's artifact (infra/Makefile runs this).")
    parser.add_argument("artifacts", type=Path, help="the artifact folder (make's $(ARTIFACTS_DIR))")
    parser.add_argument("--architecture", choices=sorted(MACHINES), default="x86_64",
                        help="the template's Architectures (default: x86_64)")
    parser.add_argument("--code", type=Path, default=Path.cwd(),
                        help="the function's code folder (default: the current one, SAM's copy of CodeUri)")
    parser.add_argument("--extra", metavar="EXTRA",
                        help="also install what the installed awsworld lists for this extra (the World server: serve)")
    parser.add_argument("--only", action="append", default=[], metavar="PACKAGE",
                        help="with --extra: only this one of the extra's packages (repeat for more)")
    parser.add_argument("--switched-by", metavar="PARAMETER",
                        help="a template parameter that deploys this function only when true: unless a samconfig "
                             "file sets it, the artifact is a placeholder (the World server: WorldServer)")
    parser.add_argument("--entry-point", default="serve", metavar="MODULE",
                        help="with --switched-by: the placeholder's module, the function's Handler's (default: serve)")
    parser.add_argument("--project", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="where relative requirements resolve (default: the folder above infra/)")
    args = parser.parse_args(argv)
    if args.only and not args.extra:
        parser.error("--only picks packages of an --extra: give the extra too")
    target = args.artifacts.resolve()
    target.mkdir(parents=True, exist_ok=True)
    project = args.project.resolve()
    if args.switched_by and not switched_on(project, args.switched_by):
        done = write_placeholder(target, args.entry_point, args.switched_by)
        say(f"{target.name}: {done}; {stamp_deploy_configuration(project, target)}")
        return 0
    try:
        done = install(args.code.resolve(), target, args.architecture, project, args.extra, args.only)
        copy_code(args.code.resolve(), target)
        compiled = compile_bytecode(target)
        stamped = stamp_deploy_configuration(project, target)
    except BuildError as error:
        print(f"{PREFIX} {error}", file=sys.stderr, flush=True)
        return 1
    say(f"{target.name}: {done}; {compiled}; {stamped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
