"""Build awsworld's sdist and wheel from a copy of the source tree (pyproject.toml, README.md, src/), and lay
out the PATH of a machine whose only Python is 3.11 (what ``sam build`` must work with).

A copy, so two test workers building at once never share setuptools' build/ and egg-info folders in the
checkout, and so what gets packaged is only what a clean clone's package would hold (no stray __pycache__).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def copy_source(source: Path, *extra: str) -> Path:
    """The package's source (pyproject.toml, README.md, src/) and the ``extra`` files or folders of the
    checkout, copied into ``source``."""
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", *extra):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return source


def uv() -> str | None:
    """The uv beside this Python (``.ci/run`` installs it into ``.venv``) or on PATH; None without one."""
    beside = Path(sys.executable).with_name("uv")
    return str(beside) if beside.exists() else shutil.which("uv")


def build(outdir: Path, *, sdist: bool = True, timeout: float = 240) -> list[Path]:
    """``python -m build`` (isolated: setuptools from the package index, as any builder gets it) into
    ``outdir``; the wheel is built from the sdist unless ``sdist`` is False (then straight from the source).
    Where uv is here, the isolated build environments are installed with it (``--installer uv``: the same
    setuptools, 5.6 s of CPU for both environments against pip's 10.2 s); else with pip."""
    source = copy_source(outdir / "source")
    dist = outdir / "dist"
    installer = uv()
    command = [sys.executable, "-m", "build", *(["--installer", "uv"] if installer else []), "--outdir", str(dist),
               *([] if sdist else ["--wheel"]), str(source)]
    env = os.environ | ({"UV": installer} if installer else {})
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    assert done.returncode == 0, f"python -m build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return sorted(dist.iterdir())


def path_without_python313(*first: Path) -> str:
    """A PATH of ``first`` and the system's folders that hold no Python but 3.11 (no pyenv shims, no venv):
    a user's machine whose ``python3`` is 3.11, where SAM's own Python builder failed ("Binary validation
    failed ... python3.13")."""
    folders = [str(folder) for folder in first]
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        if any(Path(folder, f"python3.{minor}").exists() for minor in (12, 13, 14)):
            continue
        folders.append(folder)
    path = os.pathsep.join(folders)
    assert shutil.which("python3.13", path=path) is None
    return path


def cold_start_bench() -> ModuleType:
    """bench/cold_start.py: how the functions' runtime interpreter is found and its SDK laid out."""
    spec = importlib.util.spec_from_file_location("awsworld_bench_cold_start", ROOT / "bench" / "cold_start.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def python313_env(python313: str) -> dict[str, str]:
    """How ``sam build`` (``infra/build_function.py``) finds the 3.13 it compiles with, on this machine: by its
    own search when it is pyenv's (the usual case: the user's PATH has 3.11, pyenv has 3.13), else through
    ``PYTHON313``."""
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    return {} if Path(python313).is_relative_to(pyenv_root) else {"PYTHON313": python313}
