"""Printing for people and for scripts, and the connection to the stack every remote command shares.

Values are shown as the log stores them (JSON; non-JSON types in their ``{"$t": ...}`` envelopes): the CLI
has no workflow code, so it never imports user classes to show a value. For people they are cut to one line;
``--full`` prints them whole. Tokens and ids are never cut: an operator pastes them into other commands.
``--json`` prints one JSON document with stable camelCase keys, so scripts need not parse the table layout.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from ..settings import SETTINGS, Settings, module_names
from .errors import CONFIG_HINT, CliError, usage

ELLIPSIS = "…"


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def shorten(value: Any, width: int, *, full: bool = False) -> str:
    """``value`` as one line of compact JSON, cut to ``width`` characters unless ``full``."""
    text = compact(value)
    if full or len(text) <= width:
        return text
    return text[: max(1, width - 1)] + ELLIPSIS


def terminal_width() -> int:
    return max(60, shutil.get_terminal_size((120, 24)).columns)


def when(moment: datetime | None) -> str | None:
    """``_timeline.when``'s twin, here because every command imports this module at start (nothing heavy)."""
    return None if moment is None else moment.isoformat()


def print_json(document: Any) -> None:
    print(json.dumps(document, ensure_ascii=False, indent=2, default=str))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Rows under a header line, each column as wide as its widest cell (ids and tokens are never cut); columns
    two spaces apart, the last one unpadded. ``--json`` is the form for scripts: this one is for people."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=False)]
    for row in (headers, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip())


def error_text(error: Any) -> str | None:
    """A stored error (a ``StructuredError`` or its dict) as ``Name: message [code]``."""
    from .._worker.error_shapes import error_summary

    return error_summary(error)


def check_config(hint: str = CONFIG_HINT) -> None:
    """Refuse early, with the fix (``hint``, when no stack is set), when the stack is not configured or the
    emulator named is not listening: the SDK would otherwise retry for half a minute before failing with a
    traceback."""
    missing = [var.env for var, value in ((Settings.table, SETTINGS.table), (Settings.bucket, SETTINGS.bucket))
               if value is None]
    if missing:
        raise usage(f"{' and '.join(missing)} not set: the CLI does not know which stack to read", hint)
    for variable in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        url = os.environ.get(variable)
        if not url:
            continue
        parts = urlsplit(url)
        if parts.hostname is None:
            raise usage(f"{variable}={url!r} is not a URL", "e.g. http://127.0.0.1:5000")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((parts.hostname, port), timeout=3):
                pass
        except OSError as error:
            raise CliError(f"cannot reach {url} ({variable}): {error.strerror or error}",
                           "is `awsworld dev` running? it prints the export lines for its current address") from None


@contextlib.asynccontextmanager
async def remote() -> AsyncIterator[Any]:
    """The deployed stack (or ``awsworld dev``) named by the environment, as a ``Client``."""
    from ..aws import AWSWorld
    from ..client.client import Client

    check_config()
    async with AWSWorld() as world:
        yield Client(world, registry=_registry())


def _registry() -> Any:
    """The workflows ``AWSWORLD_MODULES`` names (the stack's own setting; ``awsworld dev`` exports it): with
    them, ``start`` checks a call's arguments against the workflow's signature and a result is read through its
    codec. Without them (a shell opened outside the project, where the exports were pasted), the command goes on
    with a warning: a start's name is still checked against the names the stack publishes, and values are shown as
    the log stores them; refusing every read there would be a dead end."""
    names = module_names(SETTINGS.modules)
    if not names:
        return None
    import importlib

    from ..authoring.definitions import REGISTRY

    add_project_to_path()
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as error:
            print(f"warning: {Settings.modules.env} names {name!r}, which cannot be imported here ({error}): going "
                  "on without your code (run from your project's directory to check a start's arguments against it)",
                  file=sys.stderr)
            return None
        except Exception as error:  # a syntax error mid-edit, say: every command failed ("unexpected SyntaxError")
            print(f"warning: {Settings.modules.env} names {name!r}, which fails to import: {import_failure(error)}: "
                  "going on without your code (`awsworld dev` serves the code it had before the edit)", file=sys.stderr)
            return None
    return REGISTRY


def import_modules(modules: list[str]) -> list[str]:
    """Import the user's modules as the deployed functions do (``add_project_to_path``), registering their
    workflows and steps, and return their names (a file's path given for one, ``app.py``, read as its module's
    name: ``module_of``); a module that cannot be imported, or whose name another module holds (``shadowed``), is
    a usage error saying how to name it."""
    names = [module_of(module) for module in modules]
    for module in names:  # before the project is on the path: what each name is without it
        shadowed(module)
    add_project_to_path()
    for module in names:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise usage(f"cannot import {module!r}: {error}", "run from your project's directory, and name the "
                        "module as you would import it (myapp.workflows, not myapp/workflows.py)") from None
        except Exception as error:  # the module's own code: it read "unexpected SyntaxError", as if awsworld's bug
            raise CliError(f"cannot import {module!r}: {import_failure(error)}",
                           "fix the module and run the command again (--debug shows the traceback)") from error
    return names


def _roots() -> list[str]:
    """Where the user's modules import from, as ``add_project_to_path`` puts them on the path: ``src/`` first."""
    root = os.getcwd()
    return [os.path.join(root, "src"), root]


def module_of(argument: str) -> str:
    """The module a command's MODULE names: itself, or, for the path of a file or package folder under the project
    (``app.py``, or ``myapp/workflows.py`` under the project or its src folder), the module it is imported as (``app``,
    ``myapp.workflows``), as ``python -m`` would not take it but every newcomer types it. A path outside the
    project, or one that does not exist, is a usage error saying what to run instead."""
    if not (argument.endswith(".py") or os.sep in argument or "/" in argument):
        return argument
    path = os.path.realpath(argument)
    if not os.path.exists(path):
        raise usage(f"no file {argument!r} here ({os.getcwd()})", "run from your project's directory, and name the "
                    "module as you would import it (myapp.workflows for myapp/workflows.py)")
    for root in _roots():
        relative = os.path.relpath(path, root)
        if relative.startswith(os.pardir) or relative == os.curdir:
            continue
        parts = relative.removesuffix(".py").split(os.sep)
        if parts[-1] == "__init__":
            parts.pop()
        if parts and all(part.isidentifier() for part in parts):
            return ".".join(parts)
    folder, name = os.path.split(path)
    raise usage(f"{argument!r} is not a module this folder ({os.getcwd()}) or its src/ imports",
                f"run dev from the folder your imports start at: cd {folder} && awsworld dev "
                f"{name.removesuffix('.py')}")


def shadowed(module: str) -> None:
    """Refuse a module of the project that another module with its name hides: a file named ``random``, ``json``
    or ``awsworld`` (with ``.py``) beside the code. Asked before the project is on the path (``import_modules``).
    Where Python (or ``awsworld`` itself) has imported the other one already, the import found that one: no error,
    no workflow registered, and ``dev`` served nothing while saying only ``0 workflow(s)``. Where it has not yet
    (``random``, once ``dev`` stopped importing moto before the user's code), the project's file would be imported
    in its place, for awsworld too, which then failed to import its own ``random``: so the name is looked up as it
    resolves without the project (``find_spec``), not only in ``sys.modules``."""
    top = module.partition(".")[0]
    loaded = sys.modules.get(top)
    if loaded is not None:
        file = getattr(loaded, "__file__", None)
        places = [file] if file else list(getattr(loaded, "__path__", None) or [])  # (a namespace package: folders)
    else:
        spec = importlib.util.find_spec(top)
        if spec is None:
            return  # (nothing else has the name: the project's module is the one imported)
        places = [spec.origin] if spec.origin and spec.has_location else list(spec.submodule_search_locations or [])
    found = ", ".join(places)
    for root in _roots():
        mine = next((p for p in (os.path.join(root, f"{top}.py"), os.path.join(root, top)) if os.path.exists(p)), None)
        if mine is None or any(os.path.realpath(place).startswith(os.path.realpath(mine)) for place in places):
            continue
        whose = ("awsworld's own package" if top == "awsworld" else
                 "Python's own module" if top in sys.stdlib_module_names else "the installed module")
        raise usage(f"{os.path.relpath(mine)} is not what {module!r} imports: {whose} {top!r} ({found or 'built in'}) "
                    "has that name and is imported instead, so none of your workflows registered",
                    f"rename {os.path.relpath(mine)} (say, to {top}_flows{'.py' if mine.endswith('.py') else ''}) "
                    "and name the new module")


def import_failure(error: Exception) -> str:
    """What went wrong importing a user's module, in one line: the error, and where in the user's code (a
    ``SyntaxError`` names its file and line itself; another error the innermost frame under the project)."""
    import traceback

    if isinstance(error, SyntaxError):
        return f"{type(error).__name__}: {error}"
    root = os.getcwd() + os.sep
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith(root)]
    where = f" ({os.path.relpath(frames[-1].filename)}, line {frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def add_project_to_path() -> None:
    """Let the user's modules import as the deployed functions import them: from the current directory (the
    project's root) and its ``src/``, the folder ``awsworld init`` builds the functions from. ``src/`` is on the path
    even before it exists: ``awsworld init`` tells a project with its modules at the root to move them there, and
    ``awsworld dev``'s next reload (which invalidates the import caches) then finds them without a restart."""
    root = os.getcwd()
    for folder in (os.path.join(root, "src"), root):
        if folder not in sys.path:
            sys.path.insert(0, folder)
