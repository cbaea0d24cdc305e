"""What ``awsworld dev MODULE`` (and ``serve``) makes of the MODULE a newcomer types: a file's path (``app.py``,
``src/shop/flows.py``) is read as its module's name, and a file of the project that another module's name hides
(``random.py``, ``awsworld.py`` beside the code) is refused naming the file, instead of ``dev`` serving nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from awsworld.cli.errors import CliError

from .test_cli import Result, _clean_env, awsworld

SCRIPT = str(Path(sys.executable).with_name("awsworld"))
"""The console script a user runs: ``python -m awsworld.cli`` would put the folder on the path first, so the
user's ``random.py`` would replace Python's for awsworld too, as it does for any ``python -m`` in that folder."""


def script(*args: str, cwd: Path) -> Result:
    done = subprocess.run([SCRIPT, *args], env=_clean_env(), cwd=cwd, capture_output=True, text=True, timeout=120)
    return Result(done.returncode, done.stdout, done.stderr)

FLOWS = '''
from awsworld import workflow


@workflow(name="{name}.flow")
async def flow() -> int:
    return 1
'''


@pytest.mark.parametrize(("module", "whose"), [("random", "Python's own module 'random'"),
                                               ("awsworld", "awsworld's own package 'awsworld'")])
def test_a_module_named_like_one_python_or_awsworld_holds_is_refused_naming_the_file(
        tmp_path: Path, module: str, whose: str) -> None:
    """``awsworld dev random`` beside ``random.py``: Python's ``random`` (imported long before, by awsworld itself)
    was what the import found, so dev said ``0 workflow(s)`` and served nothing, and every ``start`` was then refused
    as an unknown name. Now the command stops at once (exit 2), naming the file, the module that hides it, and the
    fix."""
    (tmp_path / f"{module}.py").write_text(FLOWS.format(name=module))
    done = script("dev", module, cwd=tmp_path)
    assert done.code == 2, done
    assert done.err.startswith(f"awsworld dev: {module}.py is not what {module!r} imports: {whose} ("), done.err
    assert done.err.rstrip().endswith(f"has that name and is imported instead, so none of your workflows registered "
                                      f"(hint: rename {module}.py (say, to {module}_flows.py) and name the new "
                                      "module)"), done.err


def test_a_files_path_names_its_module_and_one_outside_the_project_says_where_to_run_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``awsworld dev app.py`` (what a newcomer types first) was refused (``No module named 'app.py'``); a path under
    the project, or its ``src/``, now names the module it imports as, and one outside says where to run from."""
    from awsworld.cli.output import module_of  # (here: the module's other test runs on code without it too)

    (tmp_path / "src" / "shop").mkdir(parents=True)
    (tmp_path / "src" / "shop" / "__init__.py").touch()
    (tmp_path / "src" / "shop" / "flows.py").touch()
    (tmp_path / "app.py").touch()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "far.py").write_text(FLOWS.format(name="far"))
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").touch()
    monkeypatch.chdir(project)
    assert [module_of(path) for path in ("app", "app.py", "./app.py", str(project / "app.py"))] == ["app"] * 4
    monkeypatch.chdir(tmp_path)
    assert [module_of(path) for path in ("src/shop/flows.py", "src/shop/", "src/shop/__init__.py",
                                         "elsewhere/far.py")] == ["shop.flows", "shop", "shop",
                                                                  "elsewhere.far"]
    with pytest.raises(CliError, match=r"^no file 'nope\.py' here"):
        module_of("nope.py")
    done = awsworld("dev", os.path.join("..", "elsewhere", "far.py"), env=_clean_env(), cwd=project, timeout=120)
    assert (done.code, done.err.strip()) == (2, (
        f"awsworld dev: '../elsewhere/far.py' is not a module this folder ({project}) or its src/ imports (hint: run "
        f"dev from the folder your imports start at: cd {tmp_path / 'elsewhere'} && awsworld dev far)")), done
