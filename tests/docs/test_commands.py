"""The ``awsworld`` commands the pages show are commands the CLI takes, naming workflows the pages' code defines.

A reader copies a page's shell block into a terminal as it is written. ``test_pages.py`` lets ``bash`` blocks be
written inline, so nothing ran them: Flow control's block set and paused limits of ``shop.order`` and
``shop.render``, workflows no page defines (the page's own are ``flow.process_order`` and ``flow.render``: exit
1, "no limit ... is stored"), Schedules' made a schedule of a ``shop.report`` nothing registers (exit 2), and
Operate: Deploy's ``awsworld events <run id>`` is an input redirection in any shell. Here every ``awsworld``
command of a shell block is parsed by the CLI's own parser (``awsworld.cli.build_parser``; placeholders such as
``RUN`` are plain words to it, ``[--follow]`` is read as ``--follow``, ``a | b`` as two commands of the same
group), every option an inline ``awsworld ...`` span of the prose names is one its command has, and every
workflow, step or limit a shell block names (``start``, ``schedules create``, ``limits``, ``replay --workflow``, a
``curl`` body's ``"workflow"``) is one the examples the pages include declare (``examples/``, the demo's
``src/awsworld/examples/``); and every ``AWSWORLD_*`` variable a page names is a setting awsworld reads
(``awsworld.settings``, whose every variable the generated settings page lists), and every extra a page or a
hint of the CLI names (``awsworld[serve]``) is one ``pyproject.toml`` declares.

What the commands then print is not checked here: the transcripts are (``test_transcripts.py``)."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from collections.abc import Iterator

import pytest

from awsworld.cli import build_parser

from .test_pages import ROOT, fenced_blocks, pages

SHELL = {"bash", "sh", "console", "shell"}
OPTIONAL = re.compile(r"^\[?(?P<word>[-\w.…]+)\]?$")
"""``[NAME]``, ``[--wait`` and ``NAME]``: a usage line's optional parts, typed without their brackets."""
DECLARED = re.compile(r"""\b(?P<kind>workflow|step)\(\s*name="(?P<name>[^"]+)\"""")
LIMIT_NAME = re.compile(r"""\b(?:RateLimit|Concurrency)\([^)]*\bname="(?P<name>[^"]+)\"""")


def shell_lines() -> Iterator[tuple[str, str]]:
    """(page:line, line) for every line of the pages' shell blocks, ``\\`` continuations joined."""
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for start, language, body in fenced_blocks(text):
            if language not in SHELL:
                continue
            pending, first = "", 0
            for offset, row in enumerate(body, start=1):
                if not pending:
                    first = start + offset
                if row.endswith("\\"):
                    pending += row[:-1] + " "
                    continue
                yield f"{page.relative_to(ROOT)}:{first}", pending + row
                pending = ""


def awsworld_commands(line: str) -> list[list[str]]:
    """The ``awsworld`` commands of one shell line, as the arguments after ``awsworld``."""
    words = shlex.split(line, comments=True)
    commands: list[list[str]] = []
    segment: list[str] = []
    for word in [*words, "&&"]:
        if word not in ("&&", ";"):
            segment.append(word)
            continue
        commands.extend(_alternatives(segment))
        segment = []
    return commands


def _alternatives(words: list[str]) -> list[list[str]]:
    """``awsworld schedules list | describe ID``: each alternative after a ``|`` is a command of the first's group."""
    for head in ("awsworld", ".venv/bin/awsworld"):
        if words[:1] == [head]:
            break
    else:
        return []
    parts: list[list[str]] = [[]]
    for word in words[1:]:
        if word == "|":
            parts.append([])
        else:
            optional = OPTIONAL.match(word)
            parts[-1].append(optional.group("word") if optional else word)
    group = parts[0][:1]
    return [parts[0], *(group + part for part in parts[1:])]


def parse_error(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(argv)
    except SystemExit as stop:
        if stop.code:
            return stderr.getvalue().strip().splitlines()[-1]
    return None


def commands_shown() -> list[tuple[str, list[str]]]:
    return [(where, argv) for where, line in shell_lines() for argv in awsworld_commands(line)]


def test_the_pages_show_commands() -> None:
    shown = commands_shown()
    assert len(shown) > 50, shown
    assert {argv[0] for _, argv in shown} >= {"start", "dev", "limits", "schedules", "replay", "serve", "init"}


def test_every_command_a_shell_block_shows_is_one_the_cli_takes() -> None:
    parser = build_parser()
    refused = []
    for where, argv in commands_shown():
        error = parse_error(parser, argv)
        if error is not None:
            refused.append(f"{where}: awsworld {shlex.join(argv)}: {error}")
    assert refused == []


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def unknown_options(parser: argparse.ArgumentParser, span: str) -> list[str]:
    """The options of an inline ``awsworld ...`` span its command does not have (the span may leave out the
    arguments: only the command's words and options are read)."""
    words = re.findall(r"--?[A-Za-z][\w-]*|[^\s\[\]|]+", span)[1:]
    allowed = _options(parser)
    unknown = []
    for word in words:
        if word.startswith("-"):
            if word not in allowed:
                unknown.append(word)
        elif word in _subcommands(parser):
            parser = _subcommands(parser)[word]
            allowed |= _options(parser)
    return unknown


def test_every_option_an_inline_command_names_is_its_commands() -> None:
    parser = build_parser()
    spans = []
    for page in pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            # `awsworld serve: refused ...` quotes a message: a command's name is not followed by a colon.
            spans += [(f"{page.relative_to(ROOT)}:{number}", m.group(1))
                      for m in re.finditer(r"`(awsworld (?![\w-]+:)[^`]*)`", line)]
    assert len(spans) > 200
    wrong = [f"{where}: `{span}`: {unknown}" for where, span in spans
             if (unknown := unknown_options(parser, span))]
    assert wrong == []


def declared() -> dict[str, set[str]]:
    """The workflow, step and limit names the code the pages include declares."""
    names: dict[str, set[str]] = {"workflow": set(), "step": set(), "limit": set()}
    for path in [*(ROOT / "examples").rglob("*.py"), *(ROOT / "src" / "awsworld" / "examples").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        for match in DECLARED.finditer(text):
            names[match.group("kind")].add(match.group("name"))
        names["limit"] |= {match.group("name") for match in LIMIT_NAME.finditer(text)}
    return names


def names_used(argv: list[str]) -> Iterator[tuple[str, str]]:
    """(kind, name) of the workflows, steps and limits a command names."""
    positional = [word for word in argv if not word.startswith("-")]
    if argv[0] == "start" and len(positional) > 1:
        yield "workflow", positional[1]
    if argv[:2] == ["schedules", "create"] and len(positional) > 3:
        yield "workflow", positional[3]
    if argv[0] == "limits" and len(positional) > 2:
        kind, _, name = positional[2].rpartition(":")
        yield kind or "limit", name
    if argv[0] == "replay" and "--workflow" in argv:
        yield "workflow", argv[argv.index("--workflow") + 1]


def test_the_names_a_shell_block_gives_are_declared_by_the_pages_code() -> None:
    names = declared()
    assert len(names["workflow"]) > 20 and names["limit"], names
    used = [(where, kind, name) for where, argv in commands_shown() for kind, name in names_used(argv)]
    for where, line in shell_lines():
        used += [(where, "workflow", m.group(1)) for m in re.finditer(r'"workflow": "([^"]+)"', line)]
    assert len(used) > 10, used
    assert [f"{where}: {kind} {name!r}" for where, kind, name in used if name not in names[kind]] == []


@pytest.mark.parametrize(("line", "commands"), [
    ("awsworld start shop.checkout '[\"A-17\", [\"kettle\"]]'   # prints the run id",
     [["start", "shop.checkout", '["A-17", ["kettle"]]']]),
    ("awsworld streams RUN [NAME] [--follow]   # list", [["streams", "RUN", "NAME", "--follow"]]),
    ("awsworld upgrade RUN... | --deployment D [--to latest]",
     [["upgrade", "RUN..."], ["upgrade", "--deployment", "D", "--to", "latest"]]),
    ("python3 -m venv .venv && .venv/bin/awsworld demo", [["demo"]]),
    ("awsworld events <run id>", [["events", "<run", "id>"]]),
    ("sam build && sam deploy", []),
])
def test_a_line_is_read_as_a_reader_types_it(line: str, commands: list[list[str]]) -> None:
    assert awsworld_commands(line) == commands


def test_a_wrong_command_is_refused() -> None:
    parser = build_parser()
    assert parse_error(parser, ["events", "<run", "id>"]) is not None
    assert parse_error(parser, ["limits", "set", "workflow:x", "--concurrency", "3"]) is None
    assert parse_error(parser, ["runs", "--stauts", "failed"]) is not None
    assert unknown_options(parser, "awsworld runs --parked --stauts") == ["--stauts"]
    assert unknown_options(parser, "awsworld schedules create --every") == []
    assert unknown_options(parser, "awsworld dev --state .awsworld") == []


def test_every_awsworld_variable_a_page_names_is_a_setting() -> None:
    """The settings page lists every variable ``awsworld.settings`` declares (it is generated from them); the other
    way round, a variable a page tells a reader to set is one awsworld reads."""
    from awsworld.settings import Settings

    known = {variable.env for variable in Settings.variables()}
    named = {(f"{page.relative_to(ROOT)}", name) for page in pages()
             for name in re.findall(r"\bAWSWORLD_[A-Z0-9_]*[A-Z0-9]\b", page.read_text(encoding="utf-8"))}
    assert len(named) > 50
    assert sorted((where, name) for where, name in named if name not in known) == []


def test_every_extra_a_page_or_a_hint_names_is_one_the_package_has() -> None:
    """``pip install -e '/path/to/awsworld[local,testing]'`` and the CLI's hints (``pip install 'awsworld[serve]'``)
    name extras; pip installs an unknown extra's package with a warning only, and the command then fails later."""
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"])
    sources = [*pages(), *(ROOT / "src" / "awsworld").rglob("*.py")]
    named = {(str(path.relative_to(ROOT)), extra) for path in sources
             for match in re.finditer(r"(?:awsworld|'\.)\[([a-z0-9,-]+)\]", path.read_text(encoding="utf-8"))
             for extra in match.group(1).split(",")}
    assert len(named) > 20
    assert sorted((where, extra) for where, extra in named if extra not in extras) == []
