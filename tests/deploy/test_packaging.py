"""``python -m build`` makes an sdist and a wheel that pass ``twine check`` and install in a fresh venv.

What a user gets from ``pip install awsworld`` must work without this checkout: the wheel carries the package
data (the SAM template and monitoring stack ``awsworld init`` writes, py.typed, the DynamoDB Local helper), its
version is the one ``awsworld.__version__`` says, and the installed ``awsworld`` command answers ``--help`` and
prints the template. The wheel is built from the sdist (``python -m build``'s default), so the sdist is shown
to build as well. Deselect with ``-m "not packaging"``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from awsworld import __version__
from awsworld.deploy import build_script_text, makefile_text, monitoring_text, template_text

from .dist import build

PACKAGE_DATA = ["awsworld/py.typed", "awsworld/deploy/template.yaml", "awsworld/deploy/monitoring.yaml",
                "awsworld/deploy/Makefile", "awsworld/deploy/build_function.py",
                "awsworld/local/java/LoopbackDynamoDBLocal.java"]


def run(*command: str | Path, timeout: float = 300) -> str:
    env = {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(c) for c in command], env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.packaging
@pytest.mark.timeout(600)  # about a minute alone; several on a loaded machine
def test_the_sdist_and_wheel_pass_twine_and_the_wheel_installs_in_a_fresh_venv(tmp_path: Path) -> None:
    dist = build(tmp_path / "build")
    names = sorted(p.name for p in dist)
    assert names == [f"awsworld-{__version__}-py3-none-any.whl", f"awsworld-{__version__}.tar.gz"], names
    (wheel,) = [p for p in dist if p.suffix == ".whl"]
    (sdist,) = [p for p in dist if p.name.endswith(".tar.gz")]
    run(sys.executable, "-m", "twine", "check", "--strict", *dist)

    with zipfile.ZipFile(wheel) as archive:
        members = set(archive.namelist())
    assert set(PACKAGE_DATA) <= members, set(PACKAGE_DATA) - members
    assert not any(name.startswith(("tests/", "handlers/", "bench/")) for name in members)
    with tarfile.open(sdist) as archive:
        sdist_members = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {f"src/{name}" for name in PACKAGE_DATA} | {"pyproject.toml", "README.md"} <= sdist_members

    # A fresh venv without pip of its own (ensurepip's install took 6.5 s of CPU): this pip installs into it, with
    # the venv's interpreter (pip --python), as the venv's own pip would.
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python, awsworld = venv / "bin" / "python", venv / "bin" / "awsworld"
    pip = (sys.executable, "-m", "pip", "--python", python)
    run(*pip, "install", "--quiet", wheel)
    assert run(python, "-c", "import awsworld; print(awsworld.__version__, awsworld.__file__)").split()[0] \
        == __version__
    installed = run(python, "-c", "import awsworld; print(awsworld.__file__)").strip()
    assert installed.startswith(str(venv)), f"awsworld imported from {installed}, not the fresh venv"
    assert run(*pip, "show", "awsworld").count(f"Version: {__version__}") == 1
    help_text = run(awsworld, "--help")
    assert "init" in help_text and "template" in help_text
    assert run(awsworld, "template") == template_text()
    assert run(awsworld, "template", "--monitoring") == monitoring_text()
    assert run(awsworld, "template", "--makefile") == makefile_text()
    assert run(awsworld, "template", "--build-script") == build_script_text()
    run(*pip, "check")
