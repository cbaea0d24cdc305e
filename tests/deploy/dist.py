"""Build awsworld's sdist and wheel from a copy of the source tree (pyproject.toml, README.md, src/).

A copy, so two test workers building at once never share setuptools' build/ and egg-info folders in the
checkout, and so what gets packaged is only what a clean clone's package would hold (no stray __pycache__).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build(outdir: Path, *, sdist: bool = True, timeout: float = 240) -> list[Path]:
    """``python -m build`` (isolated: setuptools from the package index, as any builder gets it) into
    ``outdir``; the wheel is built from the sdist unless ``sdist`` is False (then straight from the source)."""
    source = outdir / "source"
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    dist = outdir / "dist"
    command = [sys.executable, "-m", "build", "--outdir", str(dist), *([] if sdist else ["--wheel"]), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"python -m build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return sorted(dist.iterdir())
