"""The SAM app awsworld deploys, shipped inside the package so an installed awsworld can write it out.

``template.yaml`` (the stack), ``monitoring.yaml`` (its nested dashboard-and-alarms application), and
``Makefile`` with ``build_function.py`` (how ``sam build`` builds the functions) here are the only copies that are
edited. ``awsworld template`` prints them and ``awsworld init`` writes them into a user's
project, so upgrading awsworld never means copying files out of a repository. The repository's own
``template.yaml`` is :func:`template_text` with ``code_uri="handlers/"`` and its ``infra/monitoring.yaml`` is
:func:`monitoring_text`, and its ``infra/Makefile`` and ``infra/build_function.py`` are these two;
``tests/deploy/test_init.py`` fails when any drifts.

Everything here reads package data and formats text: no AWS client, no import of the runtime, so ``awsworld
template`` works in any environment the package installs into.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from collections.abc import Sequence

from .. import __version__

#: Where the template's nested Monitoring application points, relative to the template.
MONITORING_PATH = "infra/monitoring.yaml"
#: How ``sam build`` builds the functions (the template's ``Metadata: BuildMethod: makefile, ContextPath: infra``):
#: the Makefile and the script it runs (``build_function``: for python3.13 whatever Python is on PATH, with
#: bytecode), written beside the monitoring stack.
MAKEFILE_PATH = "infra/Makefile"
BUILD_SCRIPT_PATH = "infra/build_function.py"
#: The record of awsworld's files as init wrote them (their digests: ``awsworld/deploy/manifest.py``), beside the
#: build's files, outside the code folder ``sam build`` packs.
MANIFEST_PATH = "infra/awsworld-files.json"
#: What a project's ``.gitignore`` needs for awsworld (init adds the missing ones): ``awsworld dev --state``'s
#: usual folder (a copy of the local table, with payloads), ``sam build``'s output, and the wheel folder of the
#: build route init prints while awsworld is not on PyPI.
GITIGNORE_ENTRIES = (".awsworld/", ".aws-sam/", "dist/")
#: The folder of a user's project that ``sam build`` packages (the canonical template's CodeUri): their code and
#: nothing else. ``sam build`` copies a CodeUri whole, leaving out only a fixed list of names it knows (``.git``,
#: ``.venv``, ``__pycache__``, ``.env`` — not ``.env.local``, ``.awsworld/``, ``tests/`` or logs) and offering no
#: exclusion list of its own, so the code lives in a folder of its own: PyPA's src layout.
CODE_DIR = "src"
DEFAULT_CODE_URI = f"{CODE_DIR}/"
#: The Lambda entry points (module name -> what the route does), as the template's Handler properties name them.
HANDLERS = {
    "flow": "the flow route (SQS batch -> awsworld runtime)",
    "webhook": "the webhook route (Function URL -> hook)",
    "serve": "the World server (awsworld serve, Function URL with IAM auth)",
}

_CODE_URI_LINE = re.compile(rf"^(    CodeUri: ){re.escape(DEFAULT_CODE_URI)}$", re.M)


def _read(name: str) -> str:
    from importlib import resources  # (zipfile, pathlib's readers: not at the start of every `awsworld` command)

    return resources.files(__package__ or "awsworld.deploy").joinpath(name).read_text(encoding="utf-8")


def template_text(code_uri: str = DEFAULT_CODE_URI) -> str:
    """The stack's template; ``code_uri`` is the functions' code folder (the only line that differs between a
    user's project, whose ``src/`` holds their modules, and this repository, which builds from ``handlers/``)."""
    text = _read("template.yaml")
    if code_uri == DEFAULT_CODE_URI:
        return text
    rendered, count = _CODE_URI_LINE.subn(lambda m: f"{m.group(1)}{code_uri}", text)
    if count != 1:  # the canonical file lost its one Globals CodeUri line: fail loudly, not write a stale path
        raise RuntimeError(f"template.yaml has {count} 'CodeUri: {DEFAULT_CODE_URI}' lines, expected exactly one")
    return rendered


def monitoring_text() -> str:
    """The nested monitoring stack (dashboard and alarms), written to ``infra/monitoring.yaml``."""
    return _read("monitoring.yaml")


def makefile_text() -> str:
    """``infra/Makefile``: the functions' build targets, which run ``infra/build_function.py``."""
    return _read("Makefile")


def build_script_text() -> str:
    """``infra/build_function.py``: this package's ``build_function`` module, as a file of the project (it runs
    under whatever Python ``make`` finds, which need not have awsworld installed)."""
    return _read("build_function.py")


def handler_text(route: str) -> str:
    """A thin entry point: Lambda imports it by the template's short handler path; the logic stays in the
    package, so an upgrade of awsworld upgrades the handler without rewriting this file."""
    return (f'"""Lambda entry point of {HANDLERS[route]}. The logic is in the package:\n'
            f'``awsworld.lambda_host.{route}``; this file only gives the template a short handler path."""\n\n'
            f"from awsworld.lambda_host.{route} import handler\n\n"
            '__all__ = ["handler"]\n')


def requirements_text(version: str = __version__) -> str:
    """What ``sam build`` installs beside the user's code: awsworld pinned to the version whose template this
    is (the template and the handlers' code must match), plus a reminder where their own dependencies go. No
    ``[serve]``: the Makefile adds what the World server and the flow function need of that extra."""
    return ("# What `sam build` installs into the functions, beside the code in this folder (the template's\n"
            "# CodeUri: only this folder is packaged, so keep tests, env files and dev state outside it).\n"
            "# The World server (WorldServer=true) also gets awsworld's serve extra: infra/Makefile adds it.\n"
            "# awsworld is pinned to the version that wrote template.yaml: upgrade them together\n"
            "# (pip install -U awsworld, then awsworld init --upgrade, which keeps your lines here).\n"
            f"awsworld=={version}\n"
            "# Add here what your workflow modules import.\n")


_HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?")


def check_push_host(host: str) -> str:
    """A host name or address for ``PushHosts`` (``app.example``, ``10.0.0.7``, ``::1``), lower-cased as
    ``AWSWORLD_PUSH_HOSTS`` compares them; ``ValueError`` naming it for anything else (a URL, a port, a comma)."""
    with contextlib.suppress(ValueError):
        return str(ipaddress.ip_address(host.strip("[]")))
    if not _HOST_NAME.fullmatch(host):
        raise ValueError(f"--push-host {host!r} is not a host name or address (give app.example, not a URL or a "
                         "host:port)")
    return host.strip("[]").lower()


def stack_base_name(directory_name: str) -> str:
    """A CloudFormation-safe stack name stem from the project folder's name (letters, digits, hyphens)."""
    stem = re.sub(r"[^A-Za-z0-9]+", "-", directory_name).strip("-")
    if not stem or not stem[0].isalpha():
        stem = f"awsworld-{stem}" if stem else "awsworld"
    return stem[:100]


def samconfig_text(stack: str, modules: Sequence[str], *, world_server: bool = False,
                   push_hosts: Sequence[str] = ()) -> str:
    """samconfig.toml for a dev stack (the default) and a prod stack of the user's project, with ``Modules``
    naming their workflow modules (AWSWORLD_MODULES: what the functions import at cold start to register them;
    empty for a TypeScript-only project, rather than left out, which would deploy the template's example module)
    and, with ``world_server``, ``WorldServer=true`` (the World server for the TypeScript Workflow SDK); with
    ``push_hosts`` (checked by ``check_push_host``), ``PushHosts`` (the TypeScript apps' hosts deliveries may be
    POSTed to)."""
    names = ",".join(modules)
    server = ' WorldServer=\\"true\\"' if world_server else ""
    if push_hosts:
        server += f' PushHosts=\\"{",".join(push_hosts)}\\"'

    def environment(env: str, stage: str, retention: int, concurrency: int) -> str:
        overrides = (f'Stage=\\"{stage}\\" Modules=\\"{names}\\" RunRetentionDays=\\"{retention}\\" '
                     f'FlowMaxConcurrency=\\"{concurrency}\\" EnableTracing=\\"false\\"{server}')
        return (f"[{env}.global.parameters]\n"
                f'stack_name = "{stack}-{stage}"\n\n'
                f"[{env}.build.parameters]\n"
                "cached = false\n"
                "parallel = true\n\n"
                f"[{env}.validate.parameters]\n"
                "lint = true\n\n"
                f"[{env}.deploy.parameters]\n"
                "# CAPABILITY_IAM: the stack creates the functions' roles. CAPABILITY_AUTO_EXPAND: the Monitoring\n"
                f"# nested application ({MONITORING_PATH}).\n"
                'capabilities = "CAPABILITY_IAM CAPABILITY_AUTO_EXPAND"\n'
                "confirm_changeset = true\n"
                "fail_on_empty_changeset = false\n"
                "resolve_s3 = true\n"
                f's3_prefix = "{stack}-{stage}"\n'
                f'parameter_overrides = "{overrides}"\n\n'
                f"[{env}.logs.parameters]\n"
                "tail = true\n")

    return ("# Written by awsworld init. sam build && sam deploy --guided the first time (it asks for the region and\n"
            "# offers to save the answers here), then sam build && sam deploy; add --config-env prod for the prod\n"
            "# stack. Credentials come from the usual AWS environment or profile, never from this file.\n"
            "version = 0.1\n\n"
            + environment("default", "dev", 90, 10)
            + "\n# sam build && sam deploy --config-env prod\n"
            + environment("prod", "prod", 365, 50))
