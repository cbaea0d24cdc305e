"""The pages' sources keep their promises: no code block exists only as text, every snippet a page includes exists,
the README stays a short front door whose links land in the site, the template's parameters
table (Operate: Deploy) has every parameter with its default, and the deployer's table (Operate: IAM) a row for the
service of every resource type the templates declare.

A fenced block in ``docs/**/*.md`` is either included from a file (``--8<-- "path"`` lines and nothing else: the
file is what the tests run) or of a kind allowed inline: shell commands (``bash``), ``yaml``, ``toml`` and
``mermaid`` diagrams. Python, text (transcripts) and an unmarked fence must be included. The README, which GitHub
shows without includes, writes its Python blocks out, each a copy of an example file (``tests/docs/readme.py``)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from cfnlint.decode.cfn_yaml import loads

from awsworld.deploy import monitoring_text, template_text

from .readme import references, with_examples

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
INLINE_ALLOWED = {"bash", "yaml", "toml", "mermaid"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
SNIPPET = re.compile(r'^--8<-- "(?P<path>[^":]+)(?::[^"]*)?"$')
SECTION = re.compile(r'^--8<-- "(?P<path>[^":]+):(?P<section>[A-Za-z][\w-]*)"$')


def pages() -> list[Path]:
    return [*sorted(p for p in DOCS.rglob("*.md") if "snippets" not in p.parts), README]


def fenced_blocks(text: str) -> list[tuple[int, str, list[str]]]:
    """(line number, language, lines) of every fenced block, fences nested in list items included."""
    blocks: list[tuple[int, str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        start, marker = i, opening.group("fence")
        language = opening.group("info").strip().split(" ")[0].lower()
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(marker):
            body.append(lines[i].strip())
            i += 1
        blocks.append((start + 1, language, body))
        i += 1
    return blocks


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_code_block_is_a_file_or_an_allowed_inline_kind(page: Path) -> None:
    offenders = []
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines()
    for line, language, body in fenced_blocks(text):
        included = bool(body) and all(SNIPPET.match(row) for row in body if row)
        copied = page == README and lines[line - 2].startswith("<!-- example: ") and language == "python"
        if not included and not copied and language not in INLINE_ALLOWED:
            offenders.append(f"{page.relative_to(ROOT)}:{line}: a ```{language or '(no language)'} block written "
                             f"inline: put it in a file under examples/ and include it with --8<--")
    assert offenders == []


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_included_file_and_section_exists(page: Path) -> None:
    """What ``check_paths`` checks at build time, plus the named sections (a missing section is not a build
    error: it would include nothing)."""
    missing = []
    for _, _, body in fenced_blocks(page.read_text(encoding="utf-8")):
        for row in body:
            include = SNIPPET.match(row)
            if include is None:
                continue
            path = ROOT / include.group("path")
            section = SECTION.match(row)
            if not path.exists():
                missing.append(str(include.group("path")))
            elif section and f"[start:{section.group('section')}]" not in path.read_text(encoding="utf-8"):
                missing.append(f"{include.group('path')}:{section.group('section')}")
    assert missing == []


def test_the_readmes_code_is_the_examples_code() -> None:
    """Each README block is a copy of the example file the tests run: `python -m tests.docs.readme` rewrites them."""
    text = README.read_text(encoding="utf-8")
    assert references(text), "the README shows a workflow and a test, copied from examples/"
    assert with_examples(text) == text, "README.md's code differs from its examples: run `python -m tests.docs.readme`"


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 200
    assert "Changed:" not in text and "(Before," not in text  # such notes live in CHANGELOG.md
    # Its two fresh-machine commands, near the top: the demo, and every test as CI runs them (.ci/run installs what
    # it needs itself); then a user's own test.
    head = "\n".join(text.splitlines()[:40])
    assert "pip install -e '.[local]'" in head and "awsworld demo" in head
    assert "\nbash .ci/run\n" in head
    assert "pytest" in head


def extra_requirements(extras: list[str]) -> set[str]:
    """The distribution names ``pip install 'awsworld[extras]'`` brings (pyproject's extras, nested ones too)."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    names: set[str] = set()
    for extra in extras:
        for requirement in declared[extra]:
            nested = re.fullmatch(r"awsworld\[([\w,-]+)\]", requirement)
            name = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()
            names |= extra_requirements(nested.group(1).split(",")) if nested else {name}
    return names


def test_the_world_over_http_install_line_has_what_its_serve_commands_need() -> None:
    """*How-to: The World over HTTP* installs awsworld, then runs ``awsworld serve --world emulator``: the extras
    its install line names bring the server's (Starlette) and the emulator's (moto) packages. It named
    ``[serve]`` alone, and the next line stopped at "--world emulator needs the embedded emulator"."""
    text = (DOCS / "how-to" / "world-over-http.md").read_text(encoding="utf-8")
    [extras] = re.findall(r"pip install -e '/path/to/awsworld\[([\w,-]+)\]'", text)
    assert "awsworld serve --world emulator" in text
    assert {"starlette", "uvicorn", "moto"} <= extra_requirements(extras.split(","))


def test_the_world_over_http_pages_typescript_names_are_the_packages() -> None:
    """Every variable the page tells a TypeScript app to set (``WORLD_*``, ``WORKFLOW_TARGET_WORLD``) is one the
    package reads or names, each option of its ``createWorld({...})`` is a field of ``AwsworldWorldOptions`` (with
    those of ``AwsworldServerOptions`` it extends, which ``createClient`` takes), and the package is called what the
    page installs (it left ``deliveryBaseUrl`` out)."""
    text = (DOCS / "how-to" / "world-over-http.md").read_text(encoding="utf-8")
    package = ROOT / "packages" / "world-awsworld"
    source = "\n".join(path.read_text(encoding="utf-8") for path in sorted((package / "src").glob("*.ts")))
    variables = set(re.findall(r"\b(WORLD_[A-Z_]+)=", text)) - {"WORKFLOW_TARGET_WORLD"}
    assert variables and {v for v in variables if f"process.env.{v}" not in source} == set()
    fields: set[str] = set()
    for interface in ("AwsworldServerOptions", "AwsworldWorldOptions extends AwsworldServerOptions"):
        declared = re.search(rf"export interface {interface} \{{(.*?)\n\}}", source, re.S)
        assert declared is not None, interface
        fields |= set(re.findall(r"^  (\w+)\?:", declared.group(1), re.M))
    [options] = re.findall(r"`createWorld\(\{([\w, ]+)\}\)`", text)
    assert set(options.replace(" ", "").split(",")) == fields
    name = json.loads((package / "package.json").read_text(encoding="utf-8"))["name"]
    assert f"WORKFLOW_TARGET_WORLD={name}" in text and f"its name is `{name}`" in text


def test_the_readmes_links_into_the_site_land_on_pages() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\((docs/[^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets, "the README links into docs/"
    assert [t for t in targets if not (ROOT / t).exists()] == []


def parameter_rows(page: Path) -> dict[str, str]:
    """``{parameter: default as the page writes it}`` from the table under the page's ``## Parameters``; a row
    may name several (``| `A` / `B` | 1 / 2 | ... |``)."""
    section = page.read_text(encoding="utf-8").split("\n## Parameters\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`(\w+)`", cells[0])
        defaults = [d.strip().strip("`") for d in cells[1].split(" / ")] if len(names) > 1 else [cells[1].strip("`")]
        rows.update(zip(names, defaults, strict=True))
    return rows


def test_the_deploy_pages_parameter_table_has_every_template_parameter_with_its_default() -> None:
    """A parameter missing from the table (six were) is one an operator cannot find: *Limits* sent readers to it
    for ``WebhookReservedConcurrency``, *Dashboards and alarms* names ``OldestMessageAgeAlarmSeconds``."""
    parameters = loads(template_text())["Parameters"]
    rows = parameter_rows(DOCS / "operate" / "deploy.md")
    assert sorted(set(parameters) - set(rows)) == [], "parameters the page's table lacks"
    assert sorted(set(rows) - set(parameters)) == [], "rows for parameters the template does not have"
    wrong = {name: (rows[name], spec.get("Default")) for name, spec in parameters.items()
             if rows[name] != ("empty" if spec.get("Default") == "" else str(spec.get("Default")))}
    assert wrong == {}, "(the page's default, the template's)"


DEPLOYER_SERVICE = {
    "AWS::Serverless::Function": "Lambda",  # SAM makes its role, versions, alias, event source mapping, Function URL
    "AWS::Serverless::Application": "CloudFormation",  # the nested Monitoring stack
    "AWS::CloudWatch": "CloudWatch",
    "AWS::DynamoDB": "DynamoDB",
    "AWS::IAM": "IAM",
    "AWS::Logs": "Logs",
    "AWS::S3": "S3 (the bucket)",
    "AWS::SQS": "SQS",
    "AWS::Scheduler": "EventBridge Scheduler",
}
"""Which row of the deployer's table covers a resource type (a full type, else its service's prefix)."""


def deployer_rows(page: Path) -> dict[str, str]:
    """The deployer's table (``| service | actions |`` under *The deployer*): its actions, by service."""
    section = page.read_text(encoding="utf-8").split("## The deployer", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return {service.strip(): actions.strip() for service, actions in rows[1:]}


def test_the_iam_pages_deployer_table_has_a_row_for_every_resource_type_the_templates_declare() -> None:
    """A resource type added to a template needs its create, update and delete calls in the deployer's policy: a
    deployer following the page would otherwise meet a failed stack half-way through their first deploy."""
    rows = deployer_rows(DOCS / "operate" / "iam.md")
    types = {spec["Type"] for text in (template_text(), monitoring_text())
             for spec in loads(text)["Resources"].values()}
    unmapped = sorted(t for t in types if t not in DEPLOYER_SERVICE and t.rsplit("::", 1)[0] not in DEPLOYER_SERVICE)
    assert unmapped == [], ("resource types with no row in docs/operate/iam.md's deployer table: add the actions "
                            "CloudFormation calls for them there, and the type to DEPLOYER_SERVICE")
    services = {DEPLOYER_SERVICE.get(t) or DEPLOYER_SERVICE[t.rsplit("::", 1)[0]] for t in types}
    assert sorted(services - set(rows)) == [], "services the templates use that the deployer's table lacks"
    assert all(rows[service].count("`") >= 2 for service in services), "a row names no action"
