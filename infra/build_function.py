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
2. copies the code folder (the template's ``CodeUri``, which SAM copied into the folder ``make`` runs in) over
   it, leaving out what SAM's Python builder leaves out (``__pycache__``, ``.venv``, ``.env``, ...);
3. compiles the artifact's bytecode with a Python 3.13 (``.pyc`` files are specific to one minor version, so no
   other interpreter can write them): ``$PYTHON313``, else ``python3.13`` on ``PATH``, else one uv knows
   (``uv python find 3.13``), else pyenv's (``$(pyenv root)/versions/3.13.*``), else one uv installs (``uv python
   install 3.13``). ``unchecked-hash`` ``.pyc`` files stay valid whatever times the deployment zip records.
   Without any 3.13 the build still succeeds (the artifact runs; its cold starts compile) and says so, with
   what to install.

The packaged copy (``awsworld/deploy/build_function.py``) is the one edited; ``awsworld init`` writes it to
``infra/build_function.py`` and ``tests/deploy/test_init.py`` keeps the repository's copy equal to it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
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
PREFIX = "awsworld build:"


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


def install_command(requirements: Path, target: Path, architecture: str, uv: list[str] | None) -> list[str]:
    """The install of ``requirements`` into ``target`` for CPython 3.13 on Lambda's Linux and ``architecture``."""
    machine = MACHINES[architecture]
    if uv is not None:
        # --refresh: a local source (this repository's ".", a rebuilt wheel of the same version in dist/) is
        # rebuilt, never taken from uv's cache as it was; --link-mode copy: the artifact shares no file with it.
        command = [*uv, "pip", "install", "--quiet", "--refresh", "--link-mode", "copy", "--target", str(target),
                   "--python-version", RUNTIME_VERSION, "--python-platform", f"{machine}-manylinux_{GLIBC}"]
        for link in find_links():
            command += ["--find-links", link]
        return [*command, "-r", str(requirements)]
    platforms = [f"manylinux_{glibc}_{machine}" for glibc in (GLIBC, "2_28", "2_17")] + [f"manylinux2014_{machine}"]
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--disable-pip-version-check",
               "--target", str(target), "--implementation", "cp", "--python-version", RUNTIME_VERSION,
               "--only-binary=:all:"]
    for platform in platforms:
        command += ["--platform", platform]
    return [*command, "-r", str(requirements)]


@contextlib.contextmanager
def one_install_at_a_time(project: Path) -> Iterator[None]:
    """SAM builds each makefile function on its own, in parallel (samconfig's ``parallel = true``): two builds of
    one local source (this repository's ".") at once collide in its ``build/`` folder. One install per project
    at a time, by a lock file in the temporary folder (where ``fcntl`` exists: not on Windows)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    name = hashlib.sha256(str(project).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"awsworld-build-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def install(code: Path, target: Path, architecture: str, project: Path) -> str:
    requirements = code / "requirements.txt"
    if not requirements.is_file():
        return "no requirements.txt: nothing installed"
    uv = uv_command()
    if uv is None and subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode:
        raise BuildError(f"neither uv nor pip is available to {sys.executable}: install uv "
                         "(https://docs.astral.sh/uv/) or pip for it, or run sam build with PYTHON=<a Python "
                         "that has pip> (make reads it)")
    with one_install_at_a_time(project):
        done = subprocess.run(install_command(requirements, target, architecture, uv), cwd=project)
    if done.returncode:
        raise BuildError(f"installing {requirements.name} for CPython {RUNTIME_VERSION} ({architecture}) failed: "
                         "the installer's message above says why (the package index unreachable, say, or a "
                         "dependency that has no wheel for that platform: only a build in Lambda's own image, "
                         "sam build --use-container, can compile one)")
    # Console scripts are of no use in a function (their first lines name this machine's interpreter), nor is
    # the lock file uv leaves in a --target folder.
    shutil.rmtree(target / "bin", ignore_errors=True)
    if uv is not None:
        (target / ".lock").unlink(missing_ok=True)
    return f"installed {requirements.name} with {'uv' if uv else 'pip'} for CPython {RUNTIME_VERSION} {architecture}"


def copy_code(code: Path, target: Path) -> None:
    """The function's own code over what was installed (as SAM's builder copies it: after the dependencies)."""
    shutil.copytree(code, target, ignore=shutil.ignore_patterns(*EXCLUDED), dirs_exist_ok=True)


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
    done = subprocess.run([python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
                           str(target)], capture_output=True, text=True)
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
    parser.add_argument("--project", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="where relative requirements resolve (default: the folder above infra/)")
    args = parser.parse_args(argv)
    target = args.artifacts.resolve()
    target.mkdir(parents=True, exist_ok=True)
    try:
        installed = install(args.code.resolve(), target, args.architecture, args.project.resolve())
        copy_code(args.code.resolve(), target)
        compiled = compile_bytecode(target)
    except BuildError as error:
        print(f"{PREFIX} {error}", file=sys.stderr, flush=True)
        return 1
    say(f"{target.name}: {installed}; {compiled}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
