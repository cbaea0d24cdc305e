"""The public package, ``import awsworld``: its names are imported from their modules on first use
(``awsworld/__init__.py``, PEP 562), so the import alone loads nothing of awsworld's (every ``awsworld`` command
and every submodule's import runs it), and each name of ``__all__`` is still there for a user: the object its
module defines, by ``awsworld.X``, ``from awsworld import X``, ``import *`` and ``dir()``. Type checkers and IDEs
read the ``TYPE_CHECKING`` imports (tests/typing checks what pyright sees), which must import the same names."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import awsworld

INIT = Path(awsworld.__file__)


def fresh(code: str) -> str:
    """What ``code`` prints in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def type_checking_imports() -> dict[str, str]:
    """Each name the ``if TYPE_CHECKING:`` block imports -> its module (``authoring.calls``)."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
                 and node.test.id == "TYPE_CHECKING")
    return {alias.name: node.module or "" for node in block.body if isinstance(node, ast.ImportFrom)
            for alias in node.names}


def test_import_awsworld_loads_nothing_of_awsworld() -> None:
    loaded = json.loads(fresh("import json, sys, awsworld\n"
                              "print(json.dumps(sorted(m for m in sys.modules\n"
                              "                        if m.startswith(('awsworld.', 'pydantic')))))"))
    assert loaded == []
    assert fresh("import awsworld; print(awsworld.__version__)").strip() == awsworld.__version__


def test_the_type_checking_imports_name_every_public_name() -> None:
    assert sorted(type_checking_imports()) == sorted(awsworld.__all__)


def test_every_public_name_is_the_object_its_module_defines() -> None:
    """In a fresh interpreter (nothing imported before), by attribute and by ``from awsworld import``."""
    code = f"""
import importlib, json
import awsworld
wrong = []
for name, module in {type_checking_imports()!r}.items():
    defined = getattr(importlib.import_module("awsworld." + module), name)
    namespace = {{}}
    exec(f"from awsworld import {{name}}", namespace)
    if getattr(awsworld, name) is not defined or namespace[name] is not defined:
        wrong.append(name)
star = {{}}
exec("from awsworld import *", star)
star_names = sorted(k for k in star if not k.startswith("__"))
print(json.dumps([wrong, star_names, sorted(set(awsworld.__all__) - set(dir(awsworld)))]))
"""
    wrong, star, not_in_dir = json.loads(fresh(code))
    assert wrong == []
    assert star == sorted(awsworld.__all__)
    assert not_in_dir == []


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'awsworld' has no attribute 'Clinet'"):
        _ = awsworld.Clinet  # type: ignore[attr-defined]
    assert not hasattr(awsworld, "world_of_nothing")
    with pytest.raises(ImportError, match="cannot import name 'Clinet' from 'awsworld'"):
        exec("from awsworld import Clinet", {})


def test_what_wait_for_hook_returns_is_named_apart_from_the_workflows_hook() -> None:
    """``Run.wait_for_hook`` returns the World's record of a hook, ``awsworld.world.HookRecord``: it was
    ``awsworld.world.Hook``, which shares its name with ``awsworld.Hook[T]`` (what a workflow's ``create_hook``
    returns). The old name still imports, as the same class."""
    import typing

    from awsworld.client.client import Run
    from awsworld.world import Hook as OldName
    from awsworld.world import HookRecord

    assert typing.get_type_hints(Run.wait_for_hook)["return"] is HookRecord
    assert OldName is HookRecord and HookRecord is not awsworld.Hook
    assert HookRecord.__name__ == "HookRecord"
