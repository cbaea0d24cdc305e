"""mkdocs hook: the reference pages that are generated from the code when the site is built, so they cannot drift.

A page asks for a generated part with a marker line of its own:

- ``<!-- awsworld:cli -->``: every ``awsworld`` command, from the parser the command itself uses
  (``awsworld.cli.build_parser``): usage, what it does, each argument with its help and default;
- ``<!-- awsworld:settings -->``: every ``AWSWORLD_*`` variable, from ``awsworld.settings.settings_table``.

An unknown ``awsworld:`` marker fails the build (``PluginError``), so a typo cannot leave a page half empty.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"^<!-- awsworld:([a-z-]+) -->$", re.M)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def generated(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "cli":
            return cli_reference()
        if name == "settings":
            from awsworld.settings import settings_table

            return settings_table()
        raise PluginError(f"{page.file.src_path}: unknown generated part <!-- awsworld:{name} -->")

    return MARKER.sub(generated, markdown)


def cli_reference() -> str:
    """Markdown for every subcommand of ``awsworld``, in the parser's order, nested groups under their parent."""
    from awsworld.cli import build_parser

    return "\n".join(_command_sections(build_parser(), "awsworld", level=2))


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _command_sections(parser: argparse.ArgumentParser, prog: str, level: int) -> Iterator[str]:
    for name, summary, sub in _subcommands(parser):
        command = f"{prog} {name}"
        yield f"{'#' * level} `{command}`\n"
        if summary:
            yield f"{_text(summary)}\n"
        if sub.description and sub.description != summary:
            yield f"{_text(sub.description)}\n"
        usage = sub.format_usage().removeprefix("usage: ").strip()
        yield "```text\n" + usage + "\n```\n"
        rows = list(_argument_rows(sub))
        if rows:
            yield "| argument | what | default |\n|---|---|---|"
            yield from rows
            yield ""
        yield from _command_sections(sub, command, level + 1)


def _argument_rows(parser: argparse.ArgumentParser) -> Iterator[str]:
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            metavar = "" if action.nargs == 0 else " " + formatter._format_args(action, action.dest.upper())
            names = ", ".join(f"`{option}{metavar}`" for option in action.option_strings)
        else:
            names = f"`{formatter._format_args(action, action.dest)}`"
        help_text = formatter._expand_help(action) if action.help else ""
        default = action.default
        shown = "" if default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else f"`{default}`"
        yield f"| {names} | {_cell(help_text)} | {shown} |"


CODE_SPAN = re.compile(r"(`+).+?\1", re.S)


def _text(text: str) -> str:
    """Help and descriptions are plain text with ``code`` spans (the docstrings' double backticks, which Markdown
    reads as code too): outside the spans, ``<`` and ``*`` are escaped, so nothing turns into HTML or emphasis."""
    parts: list[str] = []
    position = 0
    for span in CODE_SPAN.finditer(text):
        parts.append(_escape(text[position:span.start()]))
        parts.append(span.group(0))
        position = span.end()
    parts.append(_escape(text[position:]))
    return "".join(parts)


def _escape(plain: str) -> str:
    return plain.replace("<", "&lt;").replace("*", r"\*")


def _cell(text: str) -> str:
    return _text(" ".join(text.split())).replace("|", r"\|")
