"""``awsworld init`` and ``awsworld template``: a user's project becomes a SAM app without copying files out of
the awsworld repository.

The app's code folder (the template's CodeUri) is the project's ``src/``, so ``sam build`` packages the user's
workflow modules as they are, with no packaging step of their own, and nothing else of the project: ``sam build``
copies a CodeUri whole (it skips only a fixed list of names such as ``.git`` and ``.venv``, and honours no
exclusion file), so a project root's tests, ``.env.*`` files, logs and ``awsworld dev --state`` folder would
ship in the Lambda artifact. Init therefore refuses a module that sits at the project's root and says how to
move it. ``src/requirements.txt`` installs awsworld (and whatever the user adds) beside the code, and
``src/flow.py``/``src/webhook.py`` are two-line entry points that re-export the package's handlers.
``samconfig.toml`` sets ``Modules`` (AWSWORLD_MODULES), which the functions import at cold start to register the
workflows. ``infra/Makefile`` and ``infra/build_function.py`` are how ``sam build`` builds the functions (for
python3.13, with bytecode, whatever Python is on PATH: ``awsworld.deploy.build_function``), and the project's
``.gitignore`` gains the entries it lacks (``GITIGNORE_ENTRIES``), its own lines kept. Files that exist are
never overwritten without ``--force``: a project's ``samconfig.toml`` may hold the user's own settings.
``init --upgrade`` (``upgrade``) is the way up after upgrading awsworld: it rewrites only the files that are
awsworld's (``_owned_files``) and the awsworld line of ``src/requirements.txt``. Nothing a user wrote is lost on
the way: init records what it wrote (``awsworld/deploy/manifest.py``), an upgrade refuses to overwrite a file
edited since, and whatever ``--force`` overwrites that differs is saved beside it first (``_save_copies``).

The next steps it prints are the commands that build from where this awsworld was installed: until awsworld is
on PyPI, ``sam build`` can resolve the ``awsworld==VERSION`` line only from a wheel it is pointed at.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .. import __version__
from . import (
    BUILD_SCRIPT_PATH,
    CODE_DIR,
    DEFAULT_CODE_URI,
    GITIGNORE_ENTRIES,
    HANDLERS,
    MAKEFILE_PATH,
    MANIFEST_PATH,
    MONITORING_PATH,
    build_script_text,
    check_push_host,
    handler_text,
    makefile_text,
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
        description="Write template.yaml, infra/monitoring.yaml, infra/Makefile, infra/build_function.py and "
                    "samconfig.toml into DIR, your project's root, and requirements.txt and "
                    f"{', '.join(f'{route}.py' for route in HANDLERS)} (the functions' entry points) "
                    "into DIR/src, the folder sam build packages: your workflow modules go there "
                    "(src/myapp/orders.py), so tests, env files, logs and dev state at the root never reach the "
                    f"Lambda artifact. {MANIFEST_PATH} records the digests of awsworld's files as init wrote them, "
                    "by which --upgrade tells your edits from them (commit it). .awsworld/, .aws-sam/ and dist/ are "
                    "added to DIR/.gitignore. Then: sam build "
                    "&& sam deploy --guided (init prints how sam build finds awsworld while it is not on PyPI; the "
                    "build needs make and any python3, not python3.13).")
    init.add_argument("directory", nargs="?", default=".", metavar="DIR", help="your project's root (default: .)")
    init.add_argument("--module", "-m", action="append", dest="modules", metavar="PKG.MODULE",
                      help="a module defining your @workflow and @step functions (repeat for more; not with "
                           "--upgrade)")
    init.add_argument("--world-server", action="store_true",
                      help="deploy the World server too (WorldServer=true in samconfig.toml): for the Workflow "
                           "SDK's TypeScript runtime (packages/world-awsworld) and HttpClient. A TypeScript-only "
                           "project gives no --module (Modules is empty: the flow function delivers its apps' "
                           "messages and runs no Python workflow); not with --upgrade")
    init.add_argument("--push-host", action="append", dest="push_hosts", metavar="HOST",
                      help="with --world-server: a host of your TypeScript app (app.example), which the flow "
                           "function may POST its messages to (PushHosts in samconfig.toml; repeat for more; "
                           "default: localhost only)")
    init.add_argument("--upgrade", action="store_true",
                      help="after upgrading awsworld: rewrite the files awsworld owns (template.yaml, infra/, "
                           "the entry points in src/) and the awsworld line of src/requirements.txt; "
                           "samconfig.toml and your own requirement lines stay as they are. It refuses, writing "
                           "nothing, when you edited one of awsworld's files since init wrote it (with --force: "
                           "saves your copy as FILE.edited, then rewrites it)")
    init.add_argument("--force", action="store_true",
                      help="overwrite files that already exist, samconfig.toml (your saved sam deploy answers) and "
                           "src/requirements.txt (your added lines) included; each one that differs from what "
                           "init wrote is saved beside it first, as FILE.edited")
    init.set_defaults(handler=run)
    template = sub.add_parser(
        "template", help="print the SAM template this version deploys (--monitoring: its monitoring stack)",
        description="Print the stack's template (or, with --monitoring, infra/monitoring.yaml; --makefile, "
                    f"{MAKEFILE_PATH}; --build-script, {BUILD_SCRIPT_PATH}): what this version deploys, for a "
                    "review. After upgrading awsworld, awsworld init --upgrade writes them all into your project.")
    printed = template.add_mutually_exclusive_group()
    printed.add_argument("--monitoring", action="store_true", help="print the nested monitoring stack instead")
    printed.add_argument("--makefile", action="store_true", help=f"print {MAKEFILE_PATH} instead")
    printed.add_argument("--build-script", action="store_true", help=f"print {BUILD_SCRIPT_PATH} instead")
    template.add_argument("--code-uri", default=DEFAULT_CODE_URI,
                          help=f"the functions' code folder, relative to the template (default: {DEFAULT_CODE_URI})")
    template.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.command == "template":
        sys.stdout.write(monitoring_text() if args.monitoring else makefile_text() if args.makefile
                         else build_script_text() if args.build_script else template_text(args.code_uri))
        return 0
    if args.upgrade:
        given = next((flag for flag, value in (("--module", args.modules), ("--world-server", args.world_server),
                                               ("--push-host", args.push_hosts)) if value), None)
        if given is not None:
            return _error(f"--upgrade keeps samconfig.toml (the modules it names, WorldServer, PushHosts): give no "
                          f"{given} with it")
        return upgrade(Path(args.directory), force=args.force)
    if args.push_hosts and not args.world_server:
        return _error("--push-host names where the World server's deliveries go: give --world-server too")
    try:
        push_hosts = [check_push_host(host) for host in args.push_hosts or []]
    except ValueError as error:
        return _error(str(error))
    if not args.modules and not args.world_server:
        return _error("name your workflow modules: awsworld init DIR -m PKG.MODULE (a TypeScript project that needs "
                      "only the World server: awsworld init DIR --world-server; an app init wrote: --upgrade)")
    return init(Path(args.directory), list(args.modules or []), force=args.force, world_server=args.world_server,
                push_hosts=push_hosts)


def _error(message: str) -> int:
    """Say what went wrong on stderr; the exit code of a well-formed command the project said no to
    (``OPERATIONAL``, ``awsworld/cli/exit_codes.py``): nothing was written."""
    print(f"awsworld init: {message}", file=sys.stderr)
    return 1


class NotUtf8Error(ValueError):
    """A project file ``--upgrade`` reads is not UTF-8 text (an editor's legacy encoding)."""


def _utf8_text(path: Path, shown: str) -> str:
    """``path``'s text, or ``NotUtf8Error`` saying which byte is not UTF-8 and what to do (sam and CloudFormation
    read UTF-8), rather than a ``UnicodeDecodeError`` traceback."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise NotUtf8Error(f"{shown} is not UTF-8 text (byte {error.start}: {error.reason}): save it as UTF-8, "
                           "which sam and CloudFormation read, and run it again") from error


def init(directory: Path, modules: list[str], *, force: bool = False, world_server: bool = False,
         push_hosts: Sequence[str] = ()) -> int:
    """Write the app into ``directory``; 0 on success, 1 (one line on stderr) when nothing was written.
    ``world_server``: samconfig.toml deploys the World server (``WorldServer=true``); with no ``modules`` (a
    TypeScript-only project) ``Modules`` is empty, and the flow function only delivers pushed messages.
    ``force``: existing files are overwritten, each one whose content would be lost saved beside it first (the
    owned files the record says init wrote as they are excepted: ``_save_copies``)."""
    if not directory.is_dir():
        return _error(f"{directory} is not a directory (create your project first)")
    for name in modules:
        if not _MODULE_NAME.fullmatch(name):
            return _error(f"{name!r} is not a module name (expected PKG.MODULE, e.g. myapp.orders)")
        if name.split(".")[0] in HANDLERS:
            return _error(f"{name!r} would be shadowed by the entry point {name.split('.')[0]}.py init writes")
    for name in modules:
        if not _found(directory / CODE_DIR, name) and _found(directory, name):
            top = _top_level(directory, name)
            return _error(f"{name} is at the project's root ({top}), and sam build would pack the root whole "
                          f"(tests, .env files, logs, .awsworld/): move it into {CODE_DIR}/ (mkdir -p {CODE_DIR} "
                          f"&& mv {top.rstrip('/')} {CODE_DIR}/), the only folder the functions are built from")
    code = f"{CODE_DIR}/"
    files = {
        **_owned_files(),
        "samconfig.toml": samconfig_text(stack_base_name(directory.resolve().name), modules,
                                         world_server=world_server, push_hosts=push_hosts),
        REQUIREMENTS_PATH: requirements_text(),
    }
    existing = [path for path in files if (directory / path).exists()]
    if existing and not force:
        return _error(f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''} in {directory} "
                      "(after upgrading awsworld: --upgrade; --force overwrites them all)")
    refused = _save_copies(directory, files, upgrading=False, force=True) if existing else None
    if refused is not None:
        return refused
    for name in modules:
        if not _found(directory / CODE_DIR, name):
            print(f"awsworld init: warning: {name} is not {_relative(name)}.py under {directory / CODE_DIR}; the "
                  f"functions import it only if {code}requirements.txt installs it", file=sys.stderr)
    _write(directory, {**files, **_recording(files)})
    print(f"wrote {', '.join([*files, MANIFEST_PATH])} in {directory} (workflow modules: "
          f"{', '.join(modules) or 'none, the World server and its deliveries only'}"
          f"{'; WorldServer=true' if world_server else ''})")
    _finish(directory)
    if world_server and push_hosts:
        print(f"the World server's URL is the stack's output WorldServerUrl; the flow function POSTs messages to "
              f"{', '.join(push_hosts)} (PushHosts in samconfig.toml)")
    elif world_server:
        print("the World server's URL is the stack's output WorldServerUrl; the flow function POSTs messages only to "
              "the hosts PushHosts lists (localhost by default): init again with --push-host app.example --force "
              "(it rewrites what init wrote), or add "
              "your app's to parameter_overrides in samconfig.toml, as its other values are written: "
              "PushHosts=\\\"app.example\\\"")
    if modules:
        print(f"sam build packages {code} only: your modules, the entry points and what {code}requirements.txt "
              "installs")
        print(f"next: add what your modules import to {code}requirements.txt, then build and deploy:")
    else:
        print("next: build and deploy:")
    _next_steps(directory)
    return 0


def upgrade(directory: Path, *, force: bool = False) -> int:
    """Bring an app ``init`` wrote up to this awsworld: its own files rewritten, the awsworld line of
    ``src/requirements.txt`` pinned to this version with the user's lines kept, ``samconfig.toml`` untouched (it
    holds the user's ``sam deploy --guided`` answers). Before this, the way up was ``init --force``, which rewrote
    those two as well. 0 on success, 1 (on stderr) when nothing was written.

    An owned file the user edited since init wrote it (its digest is no longer the record's,
    ``awsworld/deploy/manifest.py``) stops the upgrade before anything is written, naming every such file; with
    ``force`` each is saved beside it (``FILE.edited``) and rewritten. A project with no record (an earlier awsworld
    initialised it) cannot tell an edit from an older version of the file: every owned file that differs from
    this version's is saved, then rewritten, and the output says so. Refusing there instead would stop every
    such upgrade at once, for files that almost always are only older; saving loses nothing and leaves the
    project upgraded, with the record written for the next time."""
    if not (directory / "template.yaml").is_file():
        return _error(f"no template.yaml in {directory}: --upgrade brings an app awsworld init wrote up to date "
                      "(run awsworld init DIR -m PKG.MODULE first)")
    requirements = directory / REQUIREMENTS_PATH
    template = directory / "template.yaml"
    try:
        requirements_text = _utf8_text(requirements, REQUIREMENTS_PATH) if requirements.exists() else None
        template_text = _utf8_text(template, "template.yaml")
    except NotUtf8Error as error:
        return _error(f"{error}; nothing was written")
    pinned = _pinned_requirements(requirements_text)
    if pinned is None:
        return _error(f"{REQUIREMENTS_PATH} installs awsworld from a URL or path (awsworld @ ...): point it at "
                      f"awsworld {__version__} yourself; nothing was written")
    owned = _owned_files()
    owned["template.yaml"], architecture = _keep_architecture(owned["template.yaml"], template_text)
    refused = _save_copies(directory, owned, upgrading=True, force=force)
    if refused is not None:
        return refused
    written = _write(directory, {**owned, REQUIREMENTS_PATH: pinned, **_recording(owned)})
    rewritten = [path for path in written if written[path]]
    unchanged = [path for path in written if not written[path] and path != MANIFEST_PATH]
    print(f"awsworld {__version__}: " + (f"rewrote {', '.join(rewritten)}" if rewritten else "nothing to rewrite")
          + (f"; already current: {', '.join(unchanged)}" if unchanged else ""))
    print(f"kept samconfig.toml and your own lines of {REQUIREMENTS_PATH}"
          + (f", and your template's {architecture}" if architecture else "")
          + "; the changelog says what this version changes in the stack")
    _finish(directory)
    saved = (directory / "samconfig.toml").is_file()
    print("next: build and deploy" + (" (samconfig.toml holds the stack's settings):" if saved else ":"))
    _next_steps(directory, update=saved)
    return 0


def _recording(owned: dict[str, str]) -> dict[str, str]:
    """The record of the owned files about to be written (``awsworld/deploy/manifest.py``), as one more file."""
    from .manifest import manifest_text

    return {MANIFEST_PATH: manifest_text({path: owned[path] for path in _owned_files()})}


def _write(directory: Path, files: dict[str, str]) -> dict[str, bool]:
    """Write ``files`` (path -> text) into ``directory``; each path -> whether it was written (False: it already
    held that text, line endings aside). Compared as bytes: a file that is not UTF-8 is overwritten, not a
    traceback (its copy was saved: ``_save_copies``)."""
    written: dict[str, bool] = {}
    for path, text in files.items():
        target = directory / path
        written[path] = not (target.is_file()
                             and target.read_bytes().replace(b"\r\n", b"\n") == text.encode("utf-8"))
        if written[path]:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    return written


def _save_copies(directory: Path, files: dict[str, str], *, upgrading: bool, force: bool) -> int | None:
    """Before ``files`` (path -> text) are written into ``directory``: save a copy of each file there whose
    content the write would lose (``find_edits``: edited since init recorded it, or differing with no record to
    tell by) beside it, and say where each went. None: go on and write. An exit code: nothing may be written,
    and nothing was: the record is unreadable, a copy cannot be saved, or (``upgrading`` without ``force``) an
    owned file was edited, which stops the upgrade naming every such file and what to do. ``upgrading``: the
    template's ``Architectures`` is carried over (``_keep_architecture``), so a change of it alone is no edit."""
    from .manifest import ManifestError, find_edits, read_recorded, save_copy, saved_name

    try:
        recorded = read_recorded(directory)
    except ManifestError as error:
        return _error(f"{error}: delete it, and awsworld saves each of its files that differs as FILE.edited "
                      "before it rewrites it; nothing was written")
    edits = find_edits(directory, files, recorded, _carried_architectures if upgrading else None)
    if edits.edited and not force:
        assert recorded is not None  # (an edit is a difference from the record)
        named = _listing(edits.edited)
        return _error(f"--upgrade would overwrite your edits to {named} (changed since awsworld {recorded.version} "
                      f"wrote {'it' if len(edits.edited) == 1 else 'them'}: {MANIFEST_PATH} records what it "
                      "wrote); nothing was written.\n  Move each change where an upgrade keeps it: a template "
                      "parameter (docs/operate/deploy.md; your steps' permissions and VPC: "
                      "docs/how-to/aws-from-steps.md) set in samconfig.toml's parameter_overrides, or a stack "
                      "of your own. Then awsworld init --upgrade --force saves your "
                      f"{'copy' if len(edits.edited) == 1 else 'copies'} as "
                      f"{_listing([saved_name(path) for path in edits.edited])} and writes awsworld "
                      f"{__version__}'s.")
    saved: dict[str, str] = {}
    for path in files:
        if path in edits.edited or path in edits.unrecorded:
            try:
                saved[path] = save_copy(directory, path)
            except (ManifestError, OSError) as error:
                kept = f" (the copies saved so far stay: {_listing(list(saved.values()))})" if saved else ""
                return _error(f"{path} could not be saved before it is overwritten ({error}){kept}; nothing was "
                              "written")
    if saved:
        why = {path: f"edited since awsworld {recorded.version} wrote it" if recorded and path in edits.edited
               else "it differed, and no record says awsworld wrote it as it was" for path in saved}
        print(f"saved before {'rewriting' if upgrading else 'overwriting'}: "
              + ", ".join(f"{path} as {copy} ({why[path]})" for path, copy in saved.items()))
        if recorded is None and upgrading:
            print(f"  no {MANIFEST_PATH} (an earlier awsworld initialised this app): an edit cannot be told from an "
                  "older file, so each one that differed was saved; it is written now, for the next upgrade")
        example = next(iter(saved.items()))
        print(f"  compare each with the new file (diff {example[1]} {example[0]}) and carry over what is yours"
              + ("; a template parameter (docs/operate/deploy.md) or a stack of your own keeps it through upgrades"
                 if saved.keys() & _owned_files().keys() else ""))
    return None


def _listing(names: list[str]) -> str:
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def _carried_architectures(path: str, text: str) -> list[str]:
    """``text`` of ``path`` as init would have written it with each of Lambda's architectures: ``--upgrade``
    carries the template's ``Architectures`` over (Deploy's arm64 recipe, docs/operate/deploy.md, has users edit
    it), so that change alone is not an edit the upgrade must stop for."""
    from .build_function import MACHINES

    return [_with_architecture(text, architecture) for architecture in MACHINES] if path == "template.yaml" else []


REQUIREMENTS_PATH = f"{CODE_DIR}/requirements.txt"
_AWSWORLD_REQUIREMENT = re.compile(r"\s*awsworld\s*(\[[^\]]*\])?\s*(?P<rest>(==|===|~=|>=|<=|!=|<|>|@).*)?",
                                   re.IGNORECASE)


_ARCHITECTURES = re.compile(r"^(?P<indent>[ \t]+)Architectures:[ \t]*\[[ \t]*(?P<arch>[A-Za-z0-9_]+)[ \t]*\][ \t]*$",
                            re.MULTILINE)


def _keep_architecture(new: str, old: str) -> tuple[str, str | None]:
    """The template ``new`` with the functions' architecture of the app's template ``old``, and that setting when
    it differs from ``new``'s: Deploy (``docs/operate/deploy.md``) has an arm64 user edit ``Architectures`` there,
    and an upgrade must not quietly move their functions back to x86_64 (whose wheels would not match the
    ``ARCHITECTURE=arm64`` build)."""
    found, ours = _ARCHITECTURES.search(old), _ARCHITECTURES.search(new)
    if found is None or ours is None or found["arch"] == ours["arch"]:
        return new, None
    return _with_architecture(new, found["arch"]), f"Architectures: [{found['arch']}]"


def _with_architecture(text: str, architecture: str) -> str:
    """``text`` (a template) with its functions' ``Architectures`` set to ``architecture``, written as awsworld's
    template writes it; a text without that line as it is."""
    ours = _ARCHITECTURES.search(text)
    if ours is None:
        return text
    return text[:ours.start()] + ours["indent"] + f"Architectures: [{architecture}]" + text[ours.end():]


def _owned_files() -> dict[str, str]:
    """The files of an app that are awsworld's, not the user's: ``--upgrade`` rewrites these (and the awsworld
    line of the requirements)."""
    return {
        "template.yaml": template_text(),
        MONITORING_PATH: monitoring_text(),
        MAKEFILE_PATH: makefile_text(),
        BUILD_SCRIPT_PATH: build_script_text(),
        **{f"{CODE_DIR}/{route}.py": handler_text(route) for route in HANDLERS},
    }


def _pinned_requirements(text: str | None) -> str | None:
    """``text`` (the app's requirements; None: there are none) with its awsworld line pinned to this version, every
    other line as it was; None when awsworld comes from a URL or path (``awsworld @ ...``), which is the user's to
    change. A file without an awsworld line gains one (the functions cannot run without it)."""
    if text is None:
        return requirements_text()
    lines = text.splitlines(keepends=True)
    found = False
    for i, line in enumerate(lines):
        requirement = line.split("#", 1)[0].rstrip()
        match = _AWSWORLD_REQUIREMENT.fullmatch(requirement)
        if match is None:  # another requirement, a comment, a blank line
            continue
        if (match.group("rest") or "").startswith("@"):
            return None
        # the line's own comment and ending stay: only the requirement itself changes
        lines[i] = f"awsworld{match.group(1) or ''}=={__version__}" + line[len(requirement):]
        found = True
    if not found:
        lines.append(("" if not lines or lines[-1].endswith("\n") else "\n") + f"awsworld=={__version__}\n")
    return "".join(lines)


def _finish(directory: Path) -> None:
    """What init and upgrade both do after writing: the .gitignore entries, and a word if make is missing."""
    added = merge_gitignore(directory / ".gitignore")
    if added:
        print(f".gitignore: added {' '.join(added)} (dev state with payloads, sam build's output, wheels)")
    if shutil.which("make") is None:
        print(f"awsworld init: warning: no make on PATH: sam build runs {MAKEFILE_PATH} with it (install make, "
              "e.g. apt-get install make, xcode-select --install)", file=sys.stderr)


def _next_steps(directory: Path, *, update: bool = False) -> None:
    if directory.resolve() != Path.cwd().resolve():
        print(f"  cd {shlex.quote(str(directory))}")
    for line in build_route(_direct_url(), sys.executable, update=update):
        print(f"  {line}")


def merge_gitignore(path: Path) -> list[str]:
    """Add the entries of ``GITIGNORE_ENTRIES`` that ``path`` lacks, after what it holds (a new file if there is
    none); return them. Lines are never changed or reordered. An entry counts as present in any of its usual
    spellings (``.aws-sam``, ``.aws-sam/``, ``/.aws-sam/``); a negation or a wider pattern is the user's call."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    present = {line.strip().strip("/") for line in text.splitlines()}
    missing = [entry for entry in GITIGNORE_ENTRIES if entry.strip("/") not in present]
    if missing:
        block = "# awsworld: dev state (payloads), sam build's output, wheels for sam build\n" + "".join(
            f"{entry}\n" for entry in missing)
        separator = "" if not text else "\n" if text.endswith("\n") else "\n\n"
        path.write_text(text + separator + block, encoding="utf-8")
    return missing


def build_route(direct_url: dict[str, Any] | None, python: str, *, update: bool = False) -> list[str]:
    """The commands that build and deploy the app, given where the running awsworld came from (its
    ``direct_url.json``, PEP 610; None when pip installed it from a package index, which ``sam build``'s pip
    reads too). From anywhere else (a checkout, a wheel file, a git URL), ``sam build`` cannot resolve
    ``awsworld==VERSION`` from the index: build that same source into ``dist/`` (outside ``src/``, so it is not
    packed) and point its pip there.

    ``update``: the app has a ``samconfig.toml`` (``init --upgrade`` keeps it), so ``sam deploy`` reads the stack's
    name, region and parameters from it and updates the stack in place; ``--guided`` is the first deploy's,
    which asks every question again (the webhook's among them) and offers to overwrite those settings."""
    deploy = ["sam deploy"] if update else ["sam deploy --guided", GUIDED_WEBHOOK_ANSWER]
    source = _source(direct_url) if direct_url is not None else None
    if source is None:
        return ["sam build", *deploy]
    return [f"# awsworld {__version__} is not on PyPI yet: build its wheel into dist/, where sam build finds it",
            f"{shlex.quote(python)} -m pip wheel --no-deps --wheel-dir dist {shlex.quote(source)}",
            "PIP_FIND_LINKS=dist sam build", *deploy]


GUIDED_WEBHOOK_ANSWER = "# to \"WebhookFunction Function Url has no authentication. Is this okay?\" answer y"
"""The one question of ``sam deploy --guided`` whose default is wrong for this template: the webhook function's
URL is ``AuthType: NONE`` by design (a webhook's sender holds no AWS credentials, its token is its secret:
docs/operate/security.md), and SAM CLI's guided deploy asks ``Is this okay? [y/N]``, stopping with ``Security
Constraints Not Satisfied!`` on the default N (docs/get-started/deploy.md says it too)."""


def _source(direct_url: dict[str, Any]) -> str | None:
    """What ``pip wheel`` builds the installed awsworld from: its checkout or wheel file, or its URL."""
    url = direct_url.get("url")
    if not isinstance(url, str) or not url:
        return None
    vcs = direct_url.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs"):
        commit = vcs.get("commit_id")
        return f"{vcs['vcs']}+{url}" + (f"@{commit}" if commit else "")
    from urllib.request import url2pathname  # (http.client, email: not at the start of every `awsworld` command)

    parts = urlsplit(url)
    return url2pathname(parts.path) if parts.scheme == "file" else url


def _direct_url() -> dict[str, Any] | None:
    from importlib import metadata  # (email, zipfile, csv: not at the start of every `awsworld` command)

    try:
        text = metadata.distribution("awsworld").read_text("direct_url.json")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return {"url": Path(__file__).resolve().parents[3].as_uri()}
    if not text:
        return None
    value = json.loads(text)
    return value if isinstance(value, dict) else None


def _relative(name: str) -> Path:
    return Path(*name.split("."))


def _found(base: Path, name: str) -> bool:
    """Whether ``name`` imports from ``base``: a module file, or a package folder (regular or namespace)."""
    relative = _relative(name)
    return (base / relative.with_suffix(".py")).is_file() or (base / relative).is_dir()


def _top_level(directory: Path, name: str) -> str:
    """The root entry that holds ``name`` (``myapp/`` or ``orders.py``): what the move hint moves."""
    top = name.split(".")[0]
    return f"{top}/" if (directory / top).is_dir() else f"{top}.py"
