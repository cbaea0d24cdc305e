"""``awsworld init`` and ``awsworld template``: a user's project becomes a SAM app without copying files out of
the awsworld repository.

The app's code folder (the template's CodeUri) is the project itself, so ``sam build`` packages the user's
workflow modules as they are, with no packaging step of their own; ``requirements.txt`` installs awsworld (and
whatever the user adds) beside them, and ``flow.py``/``webhook.py`` are two-line entry points that re-export the
package's handlers. ``samconfig.toml`` sets ``Modules`` (AWSWORLD_MODULES), which the functions import at cold
start to register the workflows. Files that exist are never overwritten without ``--force``: a project's
``requirements.txt`` or ``samconfig.toml`` may hold the user's own settings.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from . import (
    DEFAULT_CODE_URI,
    HANDLERS,
    MONITORING_PATH,
    handler_text,
    monitoring_text,
    requirements_text,
    samconfig_text,
    stack_base_name,
    template_text,
)

COMMANDS = ("init", "template")

_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def register(sub: Any) -> None:
    """Register ``init`` and ``template`` on the ``awsworld`` command's subparsers (``awsworld.cli``'s command
    groups)."""
    init = sub.add_parser(
        "init", help="write a SAM app (template, samconfig, handlers, requirements) into your project",
        description="Write template.yaml, infra/monitoring.yaml, samconfig.toml, requirements.txt, flow.py and "
                    "webhook.py into DIR, your project's root: its code (with your workflow modules) is what "
                    "sam build packages. Then: sam build && sam deploy --guided.")
    init.add_argument("directory", nargs="?", default=".", metavar="DIR", help="your project's root (default: .)")
    init.add_argument("--module", "-m", action="append", required=True, dest="modules", metavar="PKG.MODULE",
                      help="a module defining your @workflow and @step functions (repeat for more)")
    init.add_argument("--force", action="store_true", help="overwrite files that already exist")
    init.set_defaults(handler=run)
    template = sub.add_parser(
        "template", help="print the SAM template this version deploys (--monitoring: its monitoring stack)",
        description="Print the stack's template (or, with --monitoring, infra/monitoring.yaml). After upgrading "
                    "awsworld: awsworld template > template.yaml; awsworld template --monitoring > "
                    "infra/monitoring.yaml.")
    template.add_argument("--monitoring", action="store_true", help="print the nested monitoring stack instead")
    template.add_argument("--code-uri", default=DEFAULT_CODE_URI,
                          help="the functions' code folder, relative to the template (default: .)")
    template.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.command == "template":
        sys.stdout.write(monitoring_text() if args.monitoring else template_text(args.code_uri))
        return 0
    return init(Path(args.directory), list(args.modules), force=args.force)


def _error(message: str) -> int:
    print(f"awsworld init: {message}", file=sys.stderr)
    return 1


def init(directory: Path, modules: list[str], *, force: bool = False) -> int:
    """Write the app into ``directory``; 0 on success, 1 (one line on stderr) when nothing was written."""
    if not directory.is_dir():
        return _error(f"{directory} is not a directory (create your project first)")
    for name in modules:
        if not _MODULE_NAME.fullmatch(name):
            return _error(f"{name!r} is not a module name (expected PKG.MODULE, e.g. myapp.orders)")
        if name.split(".")[0] in HANDLERS:
            return _error(f"{name!r} would be shadowed by the entry point {name.split('.')[0]}.py init writes")
    files = {
        "template.yaml": template_text(),
        MONITORING_PATH: monitoring_text(),
        "samconfig.toml": samconfig_text(stack_base_name(directory.resolve().name), modules),
        "requirements.txt": requirements_text(),
        **{f"{route}.py": handler_text(route) for route in HANDLERS},
    }
    existing = [path for path in files if (directory / path).exists()]
    if existing and not force:
        return _error(f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''} in {directory} "
                      "(--force overwrites)")
    for name in modules:
        _warn_if_not_in_project(directory, name)
    for path, text in files.items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    print(f"wrote {', '.join(files)} in {directory} (workflow modules: {', '.join(modules)})")
    print("next: add what your modules import to requirements.txt, then\n  sam build && sam deploy --guided")
    return 0


def _warn_if_not_in_project(directory: Path, name: str) -> None:
    """The functions import ``name`` from the packaged project folder; a module that lives elsewhere (a src/
    layout, a separate package) imports only if requirements.txt installs it, which init cannot check."""
    relative = Path(*name.split("."))
    if (directory / relative.with_suffix(".py")).is_file() or (directory / relative / "__init__.py").is_file():
        return
    hint = ("it is under src/: add '.' to requirements.txt to install your project"
            if (directory / "src" / relative.with_suffix(".py")).is_file()
            or (directory / "src" / relative / "__init__.py").is_file()
            else "the functions import it only if requirements.txt installs it")
    print(f"awsworld init: warning: {name} is not {relative}.py under {directory}; {hint}", file=sys.stderr)
